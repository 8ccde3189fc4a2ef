# A piped on ECS Fargate with `wisp bridge` as a sidecar: the piped (upstream's launcher
# image, config from Secrets Manager) reaches Wisp's Lambda deployment through the bridge
# on localhost:9090 (its config says `apiAddress: localhost:9090`, and it starts with
# --insecure=true: plaintext on the task's loopback only); the bridge forwards over HTTPS
# to the ALB. The bridge listens on loopback, so nothing outside the task reaches it.

data "aws_region" "current" {}

locals {
  bridge_port = 9090
  region      = data.aws_region.current.name
}

resource "aws_cloudwatch_log_group" "piped" {
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.log_kms_key_arn
}

data "aws_iam_policy_document" "ecs_tasks_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

# Pulls the images and writes the logs.
resource "aws_iam_role" "execution" {
  name               = "${var.name}-execution"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

# The piped's own role: it reads its config secret (launcher --config-from-aws-secret).
# The bridge needs no AWS permission: it only passes the piped's credentials on.
resource "aws_iam_role" "task" {
  name               = "${var.name}-task"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
}

data "aws_iam_policy_document" "task" {
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [var.piped_config_secret_arn]
  }
}

resource "aws_iam_role_policy" "task" {
  name   = "piped-config"
  role   = aws_iam_role.task.id
  policy = data.aws_iam_policy_document.task.json
}

resource "aws_ecs_task_definition" "piped" {
  #checkov:skip=CKV_AWS_336:the piped clones Git repositories and renders manifests on its filesystem; the bridge container is read-only
  family                   = var.name
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 512
  memory                   = 1024
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.architecture
  }

  container_definitions = jsonencode([
    {
      name      = "wisp-bridge"
      image     = var.wisp_image
      essential = true
      # The image's user (65532) and entrypoint (/usr/local/bin/wisp).
      command = [
        "bridge",
        "--listen=127.0.0.1:${local.bridge_port}",
        "--upstream=${var.control_plane_url}",
        # ECS stops the piped first (dependsOn), then the bridge: no delay needed, and
        # calls in flight get 20 s (stopTimeout 30).
        "--shutdown-grace=20s",
      ]
      readonlyRootFilesystem = true
      stopTimeout            = 30
      cpu                    = 128
      memoryReservation      = 64
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.piped.name
          awslogs-region        = local.region
          awslogs-stream-prefix = "wisp-bridge"
        }
      }
    },
    {
      name      = "piped"
      image     = var.piped_image
      essential = true
      command = [
        "launcher",
        "--config-from-aws-secret=true",
        "--aws-secret-id=${var.piped_config_secret_arn}",
        # Plaintext HTTP/2 to the bridge on the task's loopback.
        "--insecure=true",
      ]
      # Started after the bridge, stopped before it.
      dependsOn = [{ containerName = "wisp-bridge", condition = "START" }]
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.piped.name
          awslogs-region        = local.region
          awslogs-stream-prefix = "piped"
        }
      }
    },
  ])
}

resource "aws_ecs_service" "piped" {
  name            = var.name
  cluster         = var.cluster_arn
  task_definition = aws_ecs_task_definition.piped.arn
  # One piped per piped ID: upstream runs exactly one.
  desired_count                      = 1
  deployment_minimum_healthy_percent = 0
  deployment_maximum_percent         = 100
  launch_type                        = "FARGATE"

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = var.security_group_ids
    assign_public_ip = false
  }
}
