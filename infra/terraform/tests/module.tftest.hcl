# `terraform test`: plans the module with the real AWS provider but no AWS account
# (fake credentials, no validation calls; the data sources are overridden), so
# conditionals, for_each maps and templates are evaluated offline. Mock providers cannot
# be used: they do not support the ephemeral resource that generates the key.
# scripts/check-infra runs it when the hashicorp/aws provider is available offline and
# creates the artifact zips the functions read.

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
  target = data.aws_caller_identity.current
  values = { account_id = "123456789012" }
}

override_data {
  target = data.aws_partition.current
  values = { partition = "aws" }
}

override_data {
  target = data.aws_region.current
  values = { name = "us-east-1" }
}

# Known during the plan, so that the functions' environment is.
override_resource {
  target          = aws_secretsmanager_secret.config
  override_during = plan
  values          = { arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/config-AbCdEf" }
}

override_resource {
  target          = aws_secretsmanager_secret.encryption_key
  override_during = plan
  values          = { arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/encryption-key-AbCdEf" }
}

override_resource {
  target          = aws_elasticache_replication_group.redis
  override_during = plan
  values          = { primary_endpoint_address = "master.wisp-cache.test.use1.cache.amazonaws.com" }
}

variables {
  artifacts_dir   = "./tests/artifacts"
  vpc_id          = "vpc-0123456789abcdef0"
  alb_subnet_ids  = ["subnet-a", "subnet-b"]
  certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/test"
  domain_name     = "pipecd.example.com"
}

run "defaults" {
  command = plan

  assert {
    condition     = length(aws_lambda_function.this) == 5 && alltrue([for f in aws_lambda_function.this : f.runtime == "provided.al2023" && f.architectures == tolist(["arm64"]) && f.handler == "bootstrap"])
    error_message = "five provided.al2023 arm64 functions"
  }
  assert {
    condition     = toset([for k, f in aws_lambda_function.this : k if contains(keys(f.environment[0].variables), "WISP_ENCRYPTION_KEY_SECRET")]) == toset(["web-api", "http"])
    error_message = "only the console's functions get the encryption key"
  }
  assert {
    condition     = aws_lambda_function.this["http"].environment[0].variables["WISP_WEB_PREFIX"] == "console/"
    error_message = "the http function serves the console from console/"
  }
  assert {
    condition     = length(aws_lb_listener_rule.route) == 3 && length(aws_lb_target_group.function) == 4 && length(aws_lambda_permission.alb) == 4
    error_message = "three routed functions plus the default http function"
  }
  assert {
    condition     = aws_cloudwatch_event_target.job["deployment-chains"].input == jsonencode({ job = "deployment-chains" }) && length(aws_cloudwatch_event_rule.job) == 5
    error_message = "one schedule per job with its constant input"
  }
  assert {
    condition     = aws_dynamodb_table.this.ttl[0].attribute_name == "expires_at" && aws_dynamodb_table.this.hash_key == "pk" && aws_dynamodb_table.this.range_key == "sk"
    error_message = "the table as wisp aws init makes it"
  }
  assert {
    condition     = length(aws_elasticache_replication_group.redis) == 0 && length(aws_vpc_endpoint.secretsmanager) == 0 && alltrue([for f in aws_lambda_function.this : length(f.vpc_config) == 0])
    error_message = "no Redis, no VPC"
  }
  assert {
    condition     = output.console_url == "https://pipecd.example.com/login" && strcontains(output.config_template, "type: DYNAMODB") && !strcontains(output.config_template, "REDIS")
    error_message = "outputs"
  }
  assert {
    condition     = length(aws_secretsmanager_secret_version.encryption_key) == 0
    error_message = "the key is the operator's unless generate_encryption_key"
  }
}

run "redis_key_prefix_and_schedules" {
  command = plan

  variables {
    enable_redis            = true
    private_subnet_ids      = ["subnet-c", "subnet-d"]
    private_route_table_ids = ["rtb-1"]
    redis_auth_token        = "test-token-for-the-plan-only" #checkov:skip=CKV_SECRET_6:A stand-in for the plan-only test, not a credential.
    s3_key_prefix           = "prod/"
    job_schedules           = { "insights" = "rate(1 hour)", "deployment-chains" = null }
  }

  assert {
    condition     = length(aws_elasticache_replication_group.redis) == 1 && aws_elasticache_replication_group.redis[0].transit_encryption_enabled
    error_message = "Redis with TLS"
  }
  assert {
    condition     = length(aws_vpc_endpoint.dynamodb) == 1 && length(aws_vpc_endpoint.s3) == 1 && length(aws_vpc_endpoint.secretsmanager) == 1
    error_message = "endpoints instead of a NAT gateway"
  }
  assert {
    condition     = alltrue([for f in aws_lambda_function.this : length(f.vpc_config) == 1]) && length(aws_iam_role_policy_attachment.vpc_access) == 5
    error_message = "the functions run in the VPC"
  }
  assert {
    condition     = keys(aws_cloudwatch_event_rule.job) == ["insights"]
    error_message = "a null schedule turns its job off"
  }
  assert {
    condition     = strcontains(output.config_template, "type: REDIS") && strcontains(output.config_template, "prefix: prod/")
    error_message = "config template with Redis and the key prefix"
  }
}
