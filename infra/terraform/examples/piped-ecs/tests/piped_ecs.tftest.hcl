# `terraform test`: the piped task with its wisp bridge sidecar, planned with the real AWS
# provider and no AWS account (fake credentials, the region overridden).

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
}

override_data {
  target = data.aws_region.current
  values = { name = "us-east-1" }
}

variables {
  cluster_arn             = "arn:aws:ecs:us-east-1:123456789012:cluster/pipeds"
  subnet_ids              = ["subnet-0123456789abcdef0"]
  security_group_ids      = ["sg-0123456789abcdef0"]
  control_plane_url       = "https://pipecd.example.com"
  wisp_image              = "123456789012.dkr.ecr.us-east-1.amazonaws.com/wisp@sha256:0000000000000000000000000000000000000000000000000000000000000000"
  piped_image             = "ghcr.io/pipe-cd/launcher:v0.52.0"
  piped_config_secret_arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:piped-config-AbCdEf"
}

run "bridge_is_a_loopback_sidecar_of_the_piped" {
  command = plan

  assert {
    condition     = aws_ecs_task_definition.piped.network_mode == "awsvpc" && aws_ecs_task_definition.piped.runtime_platform[0].cpu_architecture == "ARM64"
    error_message = "a Fargate task on arm64"
  }

  assert {
    condition = (
      contains([for c in jsondecode(aws_ecs_task_definition.piped.container_definitions) : c if c.name == "wisp-bridge"][0].command, "--listen=127.0.0.1:9090") &&
      contains([for c in jsondecode(aws_ecs_task_definition.piped.container_definitions) : c if c.name == "wisp-bridge"][0].command, "--upstream=https://pipecd.example.com") &&
      [for c in jsondecode(aws_ecs_task_definition.piped.container_definitions) : c if c.name == "wisp-bridge"][0].readonlyRootFilesystem
    )
    error_message = "the bridge listens on the task's loopback, forwards to the ALB, read-only"
  }

  assert {
    condition = (
      contains([for c in jsondecode(aws_ecs_task_definition.piped.container_definitions) : c if c.name == "piped"][0].command, "--insecure=true") &&
      [for c in jsondecode(aws_ecs_task_definition.piped.container_definitions) : c if c.name == "piped"][0].dependsOn[0].containerName == "wisp-bridge"
    )
    error_message = "the piped starts after the bridge and speaks plaintext to it"
  }

  assert {
    condition     = strcontains(data.aws_iam_policy_document.task.json, "secretsmanager:GetSecretValue")
    error_message = "the task role reads the piped config secret"
  }
}

run "plain_http_upstream_is_refused" {
  command = plan

  variables {
    control_plane_url = "http://pipecd.example.com"
  }

  expect_failures = [var.control_plane_url]
}
