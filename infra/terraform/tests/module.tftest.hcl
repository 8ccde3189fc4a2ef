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

# The alarms' and the dashboard's LoadBalancer dimension, so that the dashboard body is
# known during the plan.
override_resource {
  target          = aws_lb.this
  override_during = plan
  values = {
    arn        = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/wisp/0123456789abcdef"
    arn_suffix = "app/wisp/0123456789abcdef"
    dns_name   = "wisp-123456789.us-east-1.elb.amazonaws.com"
  }
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
  assert {
    condition     = alltrue([for f in aws_lambda_function.this : f.environment[0].variables["WISP_DEPLOYMENT"] == "wisp" && f.environment[0].variables["WISP_METRICS_NAMESPACE"] == "Wisp"])
    error_message = "every function writes its metrics under namespace Wisp, Deployment wisp"
  }

  # Alarms: an errors and a throttles alarm per function, gRPC server errors per gRPC
  # function, no actions without a topic.
  assert {
    condition     = length(aws_cloudwatch_metric_alarm.function_errors) == length(aws_lambda_function.this) && length(aws_cloudwatch_metric_alarm.function_throttles) == length(aws_lambda_function.this)
    error_message = "an errors and a throttles alarm for each function"
  }
  assert {
    condition     = alltrue([for k, a in aws_cloudwatch_metric_alarm.function_errors : a.namespace == "AWS/Lambda" && a.metric_name == "Errors" && a.dimensions["FunctionName"] == aws_lambda_function.this[k].function_name])
    error_message = "each errors alarm watches its own function"
  }
  assert {
    condition     = aws_cloudwatch_metric_alarm.function_errors["jobs"].alarm_name == "wisp-job-failures" && aws_cloudwatch_metric_alarm.function_errors["jobs"].threshold == 1
    error_message = "the jobs function's errors are the job-failure alarm"
  }
  assert {
    condition     = keys(aws_cloudwatch_metric_alarm.grpc_server_errors) == ["api", "piped-api", "web-api"] && alltrue([for k, a in aws_cloudwatch_metric_alarm.grpc_server_errors : a.namespace == "Wisp" && a.metric_name == "wisp_grpc_requests_total" && a.dimensions == tomap({ Deployment = "wisp", Function = k, code_class = "server_error" }) && a.treat_missing_data == "notBreaching"])
    error_message = "a gRPC server-errors alarm per gRPC function on Wisp's own metric"
  }
  assert {
    condition     = toset([for a in aws_cloudwatch_metric_alarm.alb : a.metric_name]) == toset(["HTTPCode_ELB_5XX_Count", "HTTPCode_Target_5XX_Count", "HTTPCode_ELB_502_Count"]) && alltrue([for a in aws_cloudwatch_metric_alarm.alb : a.dimensions["LoadBalancer"] == "app/wisp/0123456789abcdef"])
    error_message = "ALB 5xx, target 5xx and 502 alarms on the load balancer"
  }
  assert {
    condition     = length(aws_cloudwatch_metric_alarm.jobs_stale) == 1 && aws_cloudwatch_metric_alarm.jobs_stale[0].metric_name == "Invocations" && aws_cloudwatch_metric_alarm.jobs_stale[0].treat_missing_data == "breaching" && aws_cloudwatch_metric_alarm.jobs_stale[0].evaluation_periods * aws_cloudwatch_metric_alarm.jobs_stale[0].period == 900
    error_message = "the jobs staleness alarm: no invocation in 15 minutes, missing data breaching"
  }
  assert {
    condition     = toset([for a in aws_cloudwatch_metric_alarm.dynamodb_throttles : a.metric_name]) == toset(["ReadThrottleEvents", "WriteThrottleEvents"]) && length(aws_cloudwatch_metric_alarm.dynamodb_system_errors[0].metric_query) == 5
    error_message = "DynamoDB throttles and system errors (a sum over four operations)"
  }
  assert {
    condition     = length(output.alarm_names) == 20 && length(toset(output.alarm_names)) == 20
    error_message = "20 alarms with distinct names by default"
  }
  assert {
    condition     = alltrue([for a in local.alarms : try(length(a.alarm_actions), 0) == 0 && try(length(a.ok_actions), 0) == 0 && length(a.alarm_description) > 0 && length(a.alarm_description) <= 1024])
    error_message = "without alarm_sns_topic_arn the alarms have no actions; each has a description"
  }

  # The dashboard names every metric it draws.
  assert {
    condition = length(aws_cloudwatch_dashboard.this) == 1 && alltrue([for m in [
      "RequestCount", "HTTPCode_ELB_5XX_Count", "HTTPCode_Target_5XX_Count", "HTTPCode_ELB_502_Count", "TargetResponseTime",
      "Invocations", "Errors", "Duration", "wisp_grpc_requests_total", "wisp_pipeds_connected",
      "ConsumedReadCapacityUnits", "ConsumedWriteCapacityUnits", "ReadThrottleEvents", "WriteThrottleEvents",
      "\"p50\"", "\"p99\"", "app/wisp/0123456789abcdef", "wisp-jobs",
    ] : strcontains(aws_cloudwatch_dashboard.this[0].dashboard_body, m)])
    error_message = "the dashboard draws requests, errors, latency, pipeds, jobs and DynamoDB"
  }
  assert {
    condition     = length(jsondecode(aws_cloudwatch_dashboard.this[0].dashboard_body).widgets) == 11
    error_message = "the dashboard body is JSON with its widgets"
  }

  # X-Ray off: Lambda's default tracing mode and no X-Ray grant.
  assert {
    condition     = alltrue([for f in aws_lambda_function.this : f.tracing_config[0].mode == "PassThrough"]) && length(aws_iam_role_policy_attachment.xray) == 0
    error_message = "no active tracing by default"
  }
}

run "alarm_topic_and_xray" {
  command = plan

  variables {
    alarm_sns_topic_arn = "arn:aws:sns:us-east-1:123456789012:wisp-alarms"
    enable_xray         = true
    alarm_thresholds    = { grpc_server_errors = 20, jobs_stale_minutes = 30 }
  }

  assert {
    condition     = length(local.alarms) == 20 && alltrue([for a in local.alarms : a.alarm_actions == toset(["arn:aws:sns:us-east-1:123456789012:wisp-alarms"]) && a.ok_actions == toset(["arn:aws:sns:us-east-1:123456789012:wisp-alarms"])])
    error_message = "every alarm notifies the topic on ALARM and OK"
  }
  assert {
    condition     = alltrue([for a in aws_cloudwatch_metric_alarm.grpc_server_errors : a.threshold == 20]) && aws_cloudwatch_metric_alarm.alb["alb-5xx"].threshold == 10 && aws_cloudwatch_metric_alarm.jobs_stale[0].evaluation_periods == 30
    error_message = "a threshold given replaces its default; the others keep theirs"
  }
  assert {
    condition     = alltrue([for f in aws_lambda_function.this : f.tracing_config[0].mode == "Active"])
    error_message = "enable_xray turns on active tracing on every function"
  }
  assert {
    condition     = length(aws_iam_role_policy_attachment.xray) == 5 && alltrue([for a in aws_iam_role_policy_attachment.xray : a.policy_arn == "arn:aws:iam::aws:policy/AWSXRayDaemonWriteAccess"])
    error_message = "every role may send traces"
  }
}

run "no_alarms_no_dashboard" {
  command = plan

  variables {
    create_alarms       = false
    create_dashboard    = false
    alarm_sns_topic_arn = "arn:aws:sns:us-east-1:123456789012:wisp-alarms"
  }

  assert {
    condition     = length(local.alarms) == 0 && length(output.alarm_names) == 0
    error_message = "create_alarms = false creates no alarm"
  }
  assert {
    condition     = length(aws_cloudwatch_dashboard.this) == 0 && output.dashboard_name == null
    error_message = "create_dashboard = false creates no dashboard"
  }
}

run "stale_window_of_one_minute_is_refused" {
  command = plan

  variables {
    alarm_thresholds = { jobs_stale_minutes = 1 }
  }

  expect_failures = [var.alarm_thresholds]
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
    condition     = length(aws_cloudwatch_metric_alarm.jobs_stale) == 0 && length(output.alarm_names) == 19
    error_message = "without the every-minute job there is no staleness alarm"
  }
  assert {
    condition     = strcontains(output.config_template, "type: REDIS") && strcontains(output.config_template, "prefix: prod/")
    error_message = "config template with Redis and the key prefix"
  }
}
