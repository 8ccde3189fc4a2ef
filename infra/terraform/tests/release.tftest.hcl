# `terraform test`: a changed config_revision moves each function's live alias to a new
# published version, as the real hashicorp/aws provider plans and applies it.
#
# 1. "deployed": the functions and their aliases (and what they depend on: `target`) are
#    applied with a mock provider: every function at version 1, its alias on it.
# 2. The next runs apply with the real provider (fake credentials, no refresh) against
#    scripts/lib/lambda_stub.py, a stand-in for the Lambda API that scripts/check-infra
#    starts and names in AWS_ENDPOINT_URL_LAMBDA (run this file only through it). The
#    provider's own plan decides whether a version is published (publish = true and a
#    changed configuration make `version` unknown); Terraform's overrides and mock
#    providers would skip that plan, so the functions and aliases are not overridden
#    here, only what they depend on (no AWS behind those).
#    "same_revision": nothing changes, nothing is published, the aliases stay on 1.
#    "new_revision": another config_revision publishes version 2 of every function, and
#    every live alias moves to it. Without config_revision in the configuration this
#    run fails (tried: the description without it).
# 3. "forget": the state is emptied with the mock provider (tests/fixtures/nothing), so
#    that the teardown neither calls AWS nor meets the secrets' prevent_destroy.

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
}

# Computed values the mock provider would make up where the real provider checks their
# form (ARNs, policy JSON); the functions' ids are their names (the run "deployed").
mock_provider "aws" {
  alias = "deployed"

  mock_resource "aws_lambda_function" {
    defaults = {
      version = "1"
    }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
  mock_resource "aws_lambda_alias" {
    defaults = { arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-fn:live" }
  }
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

override_data {
  target = data.aws_elb_service_account.current
  values = { arn = "arn:aws:iam::127311923021:root" }
}

# What the aliases depend on is applied without AWS in every run.
override_resource {
  target = aws_iam_role.function
  values = { arn = "arn:aws:iam::123456789012:role/wisp-fn" }
}

override_resource {
  target = aws_iam_role_policy.function
}

override_resource {
  target = aws_cloudwatch_log_group.function
  values = { arn = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/wisp-fn" }
}

override_resource {
  target = aws_dynamodb_table.this
  values = { arn = "arn:aws:dynamodb:us-east-1:123456789012:table/wisp" }
}

override_resource {
  target = aws_s3_bucket.this
  values = { arn = "arn:aws:s3:::wisp-bucket", id = "wisp-bucket" }
}

override_resource {
  target = aws_secretsmanager_secret.config
  values = { arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/config-AbCdEf" }
}

override_resource {
  target = aws_secretsmanager_secret.encryption_key
  values = { arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/encryption-key-AbCdEf" }
}

variables {
  artifacts_dir   = "./tests/artifacts"
  vpc_id          = "vpc-0123456789abcdef0"
  alb_subnet_ids  = ["subnet-a", "subnet-b"]
  certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/test"
  domain_name     = "pipecd.example.com"
  config_revision = "2026-11-26.1"
}

run "deployed" {
  state_key = "release"
  command   = apply
  providers = { aws = aws.deployed }

  override_resource {
    target = aws_lambda_function.this["piped-api"]
    values = { id = "wisp-piped-api", version = "1", package_type = "Zip", skip_destroy = false, tags_all = { app = "wisp" }, arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-piped-api" }
  }
  override_resource {
    target = aws_lambda_function.this["api"]
    values = { id = "wisp-api", version = "1", package_type = "Zip", skip_destroy = false, tags_all = { app = "wisp" }, arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-api" }
  }
  override_resource {
    target = aws_lambda_function.this["web-api"]
    values = { id = "wisp-web-api", version = "1", package_type = "Zip", skip_destroy = false, tags_all = { app = "wisp" }, arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-web-api" }
  }
  override_resource {
    target = aws_lambda_function.this["http"]
    values = { id = "wisp-http", version = "1", package_type = "Zip", skip_destroy = false, tags_all = { app = "wisp" }, arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-http" }
  }
  override_resource {
    target = aws_lambda_function.this["jobs"]
    values = { id = "wisp-jobs", version = "1", package_type = "Zip", skip_destroy = false, tags_all = { app = "wisp" }, arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-jobs" }
  }
  plan_options {
    target = [aws_lambda_alias.live]
  }

  assert {
    condition     = alltrue([for a in aws_lambda_alias.live : a.function_version == "1"])
    error_message = "every live alias on version 1"
  }
}

# Nothing changed: no new version, the aliases stay.
run "same_revision" {
  state_key = "release"
  command   = apply
  plan_options {
    refresh = false
    target  = [aws_lambda_alias.live]
  }

  override_resource {
    target = aws_lambda_function.this
  }
  override_resource {
    target = aws_lambda_alias.live
  }

  assert {
    condition     = alltrue([for a in aws_lambda_alias.live : a.function_version == "1"])
    error_message = "an unchanged configuration publishes nothing"
  }
}

run "new_revision" {
  state_key = "release"
  command   = apply
  plan_options {
    refresh = false
    target  = [aws_lambda_alias.live]
  }

  variables {
    config_revision = "2026-11-26.2"
  }

  assert {
    condition     = alltrue([for k, f in aws_lambda_function.this : f.version == "2"])
    error_message = "a changed config_revision publishes a new version of every function"
  }
  assert {
    condition     = alltrue([for k, a in aws_lambda_alias.live : a.function_version == "2"])
    error_message = "every live alias moves to the new version"
  }
}

# Forgets what the runs applied (tests/fixtures/nothing says why).
run "forget" {
  command   = apply
  state_key = "release"
  providers = { aws = aws.deployed }
  module {
    source = "./tests/fixtures/nothing"
  }
}
