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

# One ARN for every alias (an override cannot tell the instances apart): enough to tell an
# alias from a function, whose ARN stays unknown during the plan.
override_resource {
  target          = aws_lambda_alias.live
  override_during = plan
  values          = { arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-fn:live" }
}

# Computed from the region by the provider; overridden like the account.
override_data {
  target = data.aws_elb_service_account.current
  values = { arn = "arn:aws:iam::127311923021:root" }
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
    condition     = length(aws_iam_role_policy_attachment.vpc_access) == 0 && length(aws_nat_gateway.this) == 0 && alltrue([for f in aws_lambda_function.this : !contains(keys(f.environment[0].variables), "WISP_CACHE")])
    error_message = "no Redis: no network-interface grant, no NAT, every function with the config's cache"
  }

  # Releases: each function publishes versions, and the load balancer and the schedules
  # invoke its live alias, so that a rollback is one alias move.
  assert {
    condition     = alltrue([for f in aws_lambda_function.this : f.publish]) && length(aws_lambda_alias.live) == 5 && alltrue([for a in aws_lambda_alias.live : a.name == "live"])
    error_message = "every function publishes versions and has a live alias"
  }
  assert {
    condition     = length(aws_lb_target_group_attachment.function) == 4 && alltrue([for a in aws_lb_target_group_attachment.function : a.target_id == "arn:aws:lambda:us-east-1:123456789012:function:wisp-fn:live"])
    error_message = "every target group targets the live alias, not the function"
  }
  assert {
    condition     = alltrue([for p in aws_lambda_permission.alb : p.qualifier == "live"]) && alltrue([for p in aws_lambda_permission.job : p.qualifier == "live"]) && alltrue([for t in aws_cloudwatch_event_target.job : t.arn == "arn:aws:lambda:us-east-1:123456789012:function:wisp-fn:live"])
    error_message = "the load balancer and the schedules may invoke, and do invoke, the live alias"
  }

  # Production inputs off by default.
  assert {
    condition     = length(aws_wafv2_web_acl.this) == 0 && length(aws_wafv2_web_acl_association.this) == 0 && length(aws_s3_bucket.alb_logs) == 0 && length(aws_lb.this.access_logs) == 0 && length(aws_acm_certificate.this) == 0
    error_message = "no WAF, no access logs, the given certificate"
  }
  assert {
    condition     = aws_lb_listener.https.certificate_arn == "arn:aws:acm:us-east-1:123456789012:certificate/test"
    error_message = "the listener uses certificate_arn"
  }
  assert {
    condition     = alltrue([for r in aws_iam_role.function : r.path == "/" && r.permissions_boundary == null])
    error_message = "roles at the root path without a boundary by default"
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
    condition     = length(aws_cloudwatch_metric_alarm.revocation_failures) == 1 && length(aws_cloudwatch_metric_alarm.revocation_failures[0].metric_query) == 5 && aws_cloudwatch_metric_alarm.revocation_failures[0].threshold == 1 && alltrue([for q in aws_cloudwatch_metric_alarm.revocation_failures[0].metric_query : q.expression != "" || (q.metric[0].metric_name == "wisp_revocation_failures_total" && q.metric[0].namespace == "Wisp")])
    error_message = "a revocation-failures alarm on Wisp's own metric, summed over the four functions that record or read revocations"
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
    condition     = length(output.alarm_names) == 21 && length(toset(output.alarm_names)) == 21
    error_message = "21 alarms with distinct names by default"
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
    condition     = length(local.alarms) == 21 && alltrue([for a in local.alarms : a.alarm_actions == toset(["arn:aws:sns:us-east-1:123456789012:wisp-alarms"]) && a.ok_actions == toset(["arn:aws:sns:us-east-1:123456789012:wisp-alarms"])])
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

# Redis: the functions that use it run in the VPC; http stays out of it (its SSO exchange
# needs the internet) with the in-process cache.
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
    condition     = toset([for k, f in aws_lambda_function.this : k if length(f.vpc_config) == 1]) == toset(["piped-api", "api", "web-api", "jobs"])
    error_message = "the functions that use Redis run in the VPC"
  }
  assert {
    condition     = length(aws_lambda_function.this["http"].vpc_config) == 0 && aws_lambda_function.this["http"].environment[0].variables["WISP_CACHE"] == "MEMORY"
    error_message = "http stays out of the VPC (SSO reaches the internet) and keeps the in-process cache instead of timing out on Redis"
  }
  assert {
    condition     = toset([for k, f in aws_lambda_function.this : k if contains(keys(f.environment[0].variables), "WISP_CACHE")]) == toset(["http"])
    error_message = "the functions in the VPC use the config's cache (Redis)"
  }
  assert {
    condition     = keys(aws_iam_role_policy_attachment.vpc_access) == ["api", "jobs", "piped-api", "web-api"] && alltrue([for a in aws_iam_role_policy_attachment.vpc_access : a.policy_arn == "arn:aws:iam::aws:policy/service-role/AWSLambdaENIManagementAccess"])
    error_message = "the functions in the VPC may manage network interfaces, and nothing more (no logs:* on every log group)"
  }
  assert {
    condition     = length(aws_nat_gateway.this) == 0 && length(aws_vpc_security_group_egress_rule.lambda_https) == 0
    error_message = "no NAT by default: HTTPS from the VPC goes only to the endpoints"
  }
  assert {
    condition     = keys(aws_cloudwatch_event_rule.job) == ["insights"]
    error_message = "a null schedule turns its job off"
  }
  assert {
    condition     = length(aws_cloudwatch_metric_alarm.jobs_stale) == 0 && length(output.alarm_names) == 20
    error_message = "without the every-minute job there is no staleness alarm"
  }
  assert {
    condition     = strcontains(output.config_template, "type: REDIS") && strcontains(output.config_template, "prefix: prod/")
    error_message = "config template with Redis and the key prefix"
  }
  assert {
    condition     = length(aws_elasticache_user.app) == 0 && aws_elasticache_replication_group.redis[0].user_group_ids == null && strcontains(output.config_template, "address: master.wisp-cache") && !strcontains(output.config_template, "cacheId")
    error_message = "with redis_auth_token: token mode as before (no IAM user, the cache by address)"
  }
  assert {
    condition     = !anytrue([for d in data.aws_iam_policy_document.function : anytrue([for st in d.statement : anytrue([for a in st.actions : startswith(a, "elasticache:")])])]) && length(aws_vpc_endpoint.elasticache) == 0
    error_message = "token mode needs no ElastiCache grant nor endpoint"
  }
}

# SSO with Redis for every function: http in the VPC, the internet through a NAT gateway.
run "redis_with_http_in_the_vpc_through_nat" {
  command = plan

  variables {
    enable_redis            = true
    redis_functions         = ["piped-api", "api", "web-api", "http", "jobs"]
    create_nat_gateway      = true
    private_subnet_ids      = ["subnet-c", "subnet-d"]
    private_route_table_ids = ["rtb-1", "rtb-2"]
    redis_auth_token        = "test-token-for-the-plan-only" #checkov:skip=CKV_SECRET_6:A stand-in for the plan-only test, not a credential.
  }

  assert {
    condition     = alltrue([for f in aws_lambda_function.this : length(f.vpc_config) == 1 && !contains(keys(f.environment[0].variables), "WISP_CACHE")])
    error_message = "every function in the VPC with Redis"
  }
  assert {
    condition     = length(aws_nat_gateway.this) == 1 && aws_nat_gateway.this[0].subnet_id == "subnet-a" && [for r in aws_route.nat : r.route_table_id] == ["rtb-1", "rtb-2"] && alltrue([for r in aws_route.nat : r.destination_cidr_block == "0.0.0.0/0"])
    error_message = "a NAT gateway in the first ALB subnet and a default route to it in each private route table"
  }
  assert {
    condition     = length(aws_vpc_security_group_egress_rule.lambda_https) == 1 && aws_vpc_security_group_egress_rule.lambda_https[0].cidr_ipv4 == "0.0.0.0/0" && aws_vpc_security_group_egress_rule.lambda_https[0].from_port == 443
    error_message = "the functions may open HTTPS to the internet (GitHub, the OIDC provider)"
  }
}

# IAM auth (no token given): the config names the cache by id, the functions that use
# it and only they get the lookup and elasticache:Connect on the cache and the user.
run "redis_node_based_with_iam_auth" {
  command = plan

  variables {
    enable_redis            = true
    private_subnet_ids      = ["subnet-c", "subnet-d"]
    private_route_table_ids = ["rtb-1"]
  }

  assert {
    condition     = length(aws_elasticache_replication_group.redis) == 1 && aws_elasticache_replication_group.redis[0].auth_token == null && aws_elasticache_replication_group.redis[0].user_group_ids == toset(["wisp-users"]) && aws_elasticache_replication_group.redis[0].transit_encryption_enabled
    error_message = "a replication group with TLS and the user group, no AUTH token"
  }
  assert {
    condition     = length(aws_elasticache_serverless_cache.redis) == 0
    error_message = "no serverless cache in node-based mode"
  }
  assert {
    condition     = aws_elasticache_user.app[0].user_id == "wisp-app" && aws_elasticache_user.app[0].user_name == "wisp-app" && one(aws_elasticache_user.app[0].authentication_mode).type == "iam" && aws_elasticache_user.app[0].engine == "redis"
    error_message = "the functions' user has IAM auth, its name equal to its id"
  }
  assert {
    condition     = !strcontains(aws_elasticache_user.app[0].access_string, "@all") || strcontains(aws_elasticache_user.app[0].access_string, "-@all")
    error_message = "the functions' user may run only the commands Wisp sends"
  }
  assert {
    condition     = aws_elasticache_user.disabled_default[0].user_name == "default" && startswith(aws_elasticache_user.disabled_default[0].access_string, "off ") && aws_elasticache_user_group.redis[0].user_ids == toset(["wisp-default", "wisp-app"])
    error_message = "the user group's default user is disabled"
  }
  assert {
    condition     = length(aws_vpc_endpoint.elasticache) == 1 && aws_vpc_endpoint.elasticache[0].service_name == "com.amazonaws.us-east-1.elasticache" && aws_vpc_endpoint.elasticache[0].private_dns_enabled
    error_message = "the lookup reaches the ElastiCache API inside the VPC"
  }
  assert {
    condition     = alltrue([for k in ["piped-api", "api", "web-api", "jobs"] : anytrue([for st in data.aws_iam_policy_document.function[k].statement : st.sid == "CacheLookup" && st.actions == toset(["elasticache:DescribeReplicationGroups"]) && st.resources == toset(["arn:aws:elasticache:us-east-1:123456789012:replicationgroup:wisp-cache"])])])
    error_message = "the functions that use the cache look it up (DescribeReplicationGroups on the group)"
  }
  assert {
    condition     = alltrue([for k in ["piped-api", "api", "web-api", "jobs"] : anytrue([for st in data.aws_iam_policy_document.function[k].statement : st.sid == "CacheUserLookup" && st.actions == toset(["elasticache:DescribeUsers"]) && st.resources == toset(["arn:aws:elasticache:us-east-1:123456789012:user:wisp-app"])])])
    error_message = "the functions that use the cache read their user (DescribeUsers on the user)"
  }
  assert {
    condition     = alltrue([for k in ["piped-api", "api", "web-api", "jobs"] : anytrue([for st in data.aws_iam_policy_document.function[k].statement : st.sid == "CacheConnect" && st.actions == toset(["elasticache:Connect"]) && st.resources == toset(["arn:aws:elasticache:us-east-1:123456789012:replicationgroup:wisp-cache", "arn:aws:elasticache:us-east-1:123456789012:user:wisp-app"])])])
    error_message = "the functions that use the cache may connect to it as the user"
  }
  assert {
    condition     = !anytrue([for st in data.aws_iam_policy_document.function["http"].statement : anytrue([for a in st.actions : startswith(a, "elasticache:")])])
    error_message = "http does not use the cache: no ElastiCache grant"
  }
  assert {
    condition     = strcontains(output.config_template, "cacheId: wisp-cache") && strcontains(output.config_template, "iamAuth: true") && strcontains(output.config_template, "username: wisp-app") && !strcontains(output.config_template, "serverless") && !strcontains(output.config_template, "authToken") && !strcontains(output.config_template, "address: master")
    error_message = "the config names the cache by id with IAM auth"
  }
  assert {
    condition     = output.redis_cache_id == "wisp-cache" && output.redis_username == "wisp-app"
    error_message = "the cache id and user in the outputs"
  }
}

run "redis_serverless" {
  command = plan

  variables {
    enable_redis            = true
    redis_mode              = "serverless"
    redis_functions         = ["piped-api", "jobs"]
    private_subnet_ids      = ["subnet-c", "subnet-d"]
    private_route_table_ids = ["rtb-1"]
  }

  assert {
    condition     = length(aws_elasticache_replication_group.redis) == 0 && length(aws_elasticache_serverless_cache.redis) == 1
    error_message = "a serverless cache, no replication group"
  }
  assert {
    condition     = aws_elasticache_serverless_cache.redis[0].engine == "valkey" && aws_elasticache_serverless_cache.redis[0].name == "wisp-cache" && aws_elasticache_serverless_cache.redis[0].user_group_id == "wisp-users" && aws_elasticache_serverless_cache.redis[0].subnet_ids == toset(["subnet-c", "subnet-d"])
    error_message = "ElastiCache Serverless for Valkey in the private subnets, with the user group"
  }
  assert {
    condition     = one(one(aws_elasticache_serverless_cache.redis[0].cache_usage_limits).data_storage).maximum == 1 && one(one(aws_elasticache_serverless_cache.redis[0].cache_usage_limits).data_storage).unit == "GB"
    error_message = "the storage capped at redis_serverless_max_storage_gb"
  }
  assert {
    condition     = aws_elasticache_user.app[0].engine == "valkey" && aws_elasticache_user_group.redis[0].engine == "valkey"
    error_message = "Valkey users"
  }
  assert {
    condition     = toset([for k, d in data.aws_iam_policy_document.function : k if anytrue([for st in d.statement : st.sid == "CacheLookup" && st.actions == toset(["elasticache:DescribeServerlessCaches"]) && st.resources == toset(["arn:aws:elasticache:us-east-1:123456789012:serverlesscache:wisp-cache"])])]) == toset(["piped-api", "jobs"])
    error_message = "exactly the functions in redis_functions look the serverless cache up"
  }
  assert {
    condition     = toset([for k, d in data.aws_iam_policy_document.function : k if anytrue([for st in d.statement : contains(st.actions, "elasticache:Connect") && contains(st.resources, "arn:aws:elasticache:us-east-1:123456789012:serverlesscache:wisp-cache")])]) == toset(["piped-api", "jobs"])
    error_message = "exactly the functions in redis_functions may connect to the serverless cache"
  }
  assert {
    condition     = strcontains(output.config_template, "cacheId: wisp-cache") && strcontains(output.config_template, "serverless: true") && strcontains(output.config_template, "iamAuth: true")
    error_message = "the config names the serverless cache by id"
  }
}

run "redis_serverless_with_a_token_is_refused" {
  command = plan

  variables {
    enable_redis            = true
    redis_mode              = "serverless"
    private_subnet_ids      = ["subnet-c", "subnet-d"]
    private_route_table_ids = ["rtb-1"]
    redis_auth_token        = "test-token-for-the-plan-only" #checkov:skip=CKV_SECRET_6:A stand-in for the plan-only test, not a credential.
  }

  expect_failures = [aws_elasticache_serverless_cache.redis]
}

run "http_in_the_vpc_without_egress_is_refused" {
  command = plan

  variables {
    enable_redis            = true
    redis_functions         = ["piped-api", "http"]
    private_subnet_ids      = ["subnet-c", "subnet-d"]
    private_route_table_ids = ["rtb-1"]
    redis_auth_token        = "test-token-for-the-plan-only" #checkov:skip=CKV_SECRET_6:A stand-in for the plan-only test, not a credential.
  }

  expect_failures = [aws_lambda_function.this]
}

run "kms_key" {
  command = plan

  variables {
    kms_key_arn = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000"
  }

  assert {
    condition     = aws_dynamodb_table.this.server_side_encryption[0].kms_key_arn == var.kms_key_arn && aws_secretsmanager_secret.config.kms_key_id == var.kms_key_arn && aws_secretsmanager_secret.encryption_key.kms_key_id == var.kms_key_arn
    error_message = "the table and the secrets use the key"
  }
  assert {
    condition     = one(one(aws_s3_bucket_server_side_encryption_configuration.this.rule).apply_server_side_encryption_by_default).kms_master_key_id == var.kms_key_arn && one(aws_s3_bucket_server_side_encryption_configuration.this.rule).bucket_key_enabled
    error_message = "the bucket uses the key, with a bucket key"
  }
  assert {
    condition     = alltrue([for f in aws_lambda_function.this : f.kms_key_arn == var.kms_key_arn]) && alltrue([for g in aws_cloudwatch_log_group.function : g.kms_key_id == var.kms_key_arn])
    error_message = "the functions' environment and logs use the key"
  }
  assert {
    condition     = alltrue([for d in data.aws_iam_policy_document.function : anytrue([for st in d.statement : st.sid == "Kms" && contains(st.actions, "kms:Decrypt") && contains(st.resources, var.kms_key_arn)])])
    error_message = "every role may use the key"
  }
}

# The module requests the certificate and validates it in the zone.
run "custom_domain_with_route53" {
  command = plan

  variables {
    certificate_arn = null
    route53_zone_id = "Z0123456789ABCDEFGHIJ"
  }

  assert {
    condition     = length(aws_acm_certificate.this) == 1 && aws_acm_certificate.this[0].domain_name == "pipecd.example.com" && aws_acm_certificate.this[0].validation_method == "DNS"
    error_message = "a DNS-validated certificate for domain_name"
  }
  assert {
    condition     = keys(aws_route53_record.certificate_validation) == ["pipecd.example.com"] && aws_route53_record.certificate_validation["pipecd.example.com"].zone_id == "Z0123456789ABCDEFGHIJ" && length(aws_acm_certificate_validation.this) == 1
    error_message = "its validation record in the zone, and the listener waits for the validation"
  }
  assert {
    condition     = length(aws_route53_record.alias) == 1 && aws_route53_record.alias[0].name == "pipecd.example.com" && aws_route53_record.alias[0].type == "A"
    error_message = "domain_name points at the load balancer"
  }
  assert {
    condition     = output.address == "https://pipecd.example.com"
    error_message = "the address is the domain"
  }
}

# Config changes reach the live aliases: config_revision is part of each function's
# configuration (its description), and a function with publish = true publishes a new
# version when its configuration changes, which the live alias then points at
# (tests/release.tftest.hcl applies it: the alias moves to the new version).
run "config_revision" {
  command = plan

  variables {
    config_revision = "2026-11-26.1"
  }

  assert {
    condition     = alltrue([for k, f in aws_lambda_function.this : f.publish && f.description == "Wisp ${k} (wisp-${k}), config 2026-11-26.1"])
    error_message = "every function carries the config revision in its configuration"
  }
}

run "config_revision_is_checked" {
  command = plan

  variables {
    config_revision = "today please"
  }

  expect_failures = [var.config_revision]
}

# A root module creating the zone, the certificate and the private route tables in the
# same apply (unknown during the plan) plans: count and for_each use create_route53_record,
# create_certificate and the number of route tables.
run "common_layout_own_certificate" {
  command = plan

  module {
    source = "./tests/fixtures/common_layout"
  }

  variables {
    module_creates_certificate = false
  }

  # The module's data sources, under the fixture's module call.
  override_data {
    target = module.wisp.data.aws_caller_identity.current
    values = { account_id = "123456789012" }
  }
  override_data {
    target = module.wisp.data.aws_partition.current
    values = { partition = "aws" }
  }
  override_data {
    target = module.wisp.data.aws_region.current
    values = { name = "us-east-1" }
  }

  # Only the module's outputs are visible from here: that the plan is made at all is the
  # point (it failed with "Invalid count argument" and "Invalid for_each argument").
  assert {
    condition     = module.wisp.address == "https://pipecd.example.com" && length(module.wisp.function_names) == 5
    error_message = "the deployment plans with the root module's zone, certificate and route tables"
  }
}

run "common_layout_module_certificate" {
  command = plan

  module {
    source = "./tests/fixtures/common_layout"
  }

  variables {
    module_creates_certificate = true
  }

  # The module's data sources, under the fixture's module call.
  override_data {
    target = module.wisp.data.aws_caller_identity.current
    values = { account_id = "123456789012" }
  }
  override_data {
    target = module.wisp.data.aws_partition.current
    values = { partition = "aws" }
  }
  override_data {
    target = module.wisp.data.aws_region.current
    values = { name = "us-east-1" }
  }

  assert {
    condition     = module.wisp.address == "https://pipecd.example.com" && length(module.wisp.function_names) == 5
    error_message = "the deployment plans with the module's certificate in the root module's new zone"
  }
}

run "no_domain_is_refused" {
  command = plan

  variables {
    domain_name = null
  }

  expect_failures = [aws_lb_listener.https]
}

run "no_certificate_nor_zone_is_refused" {
  command = plan

  variables {
    certificate_arn = null
  }

  expect_failures = [aws_lb_listener.https]
}

run "waf_on" {
  command = plan

  variables {
    create_waf_web_acl  = true
    waf_auth_rate_limit = 50
  }

  assert {
    condition     = length(aws_wafv2_web_acl.this) == 1 && aws_wafv2_web_acl.this[0].scope == "REGIONAL" && length(aws_wafv2_web_acl.this[0].default_action[0].allow) == 1
    error_message = "a regional web ACL that allows by default"
  }
  assert {
    condition = alltrue([for r in aws_wafv2_web_acl.this[0].rule : length(r.action[0].block) == 1
      && r.statement[0].rate_based_statement[0].limit == 50
      && r.statement[0].rate_based_statement[0].aggregate_key_type == "IP"
      && r.statement[0].rate_based_statement[0].scope_down_statement[0].byte_match_statement[0].search_string == "/auth/"
    && r.statement[0].rate_based_statement[0].scope_down_statement[0].byte_match_statement[0].positional_constraint == "STARTS_WITH"]) && length(aws_wafv2_web_acl.this[0].rule) == 1
    error_message = "one rule: block a client address past the limit on paths starting with /auth/"
  }
  assert {
    condition     = length(aws_wafv2_web_acl_association.this) == 1 && aws_wafv2_web_acl_association.this[0].resource_arn == "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/wisp/0123456789abcdef"
    error_message = "the web ACL is associated with the load balancer"
  }
}

run "waf_of_the_operator" {
  command = plan

  variables {
    waf_web_acl_arn    = "arn:aws:wafv2:us-east-1:123456789012:regional/webacl/ours/0000"
    create_waf_web_acl = true
  }

  assert {
    condition     = length(aws_wafv2_web_acl.this) == 0 && aws_wafv2_web_acl_association.this[0].web_acl_arn == "arn:aws:wafv2:us-east-1:123456789012:regional/webacl/ours/0000"
    error_message = "the operator's web ACL is associated, none is created"
  }
}

run "access_logs_on" {
  command = plan

  variables {
    create_alb_access_logs_bucket = true
  }

  assert {
    condition     = aws_s3_bucket.alb_logs[0].bucket == "wisp-alb-logs-123456789012-us-east-1" && aws_lb.this.access_logs[0].bucket == "wisp-alb-logs-123456789012-us-east-1" && aws_lb.this.access_logs[0].enabled && aws_lb.this.access_logs[0].prefix == "wisp"
    error_message = "the load balancer logs into the bucket the module creates"
  }
  assert {
    condition     = strcontains(data.aws_iam_policy_document.alb_logs[0].json, "arn:aws:iam::127311923021:root") && strcontains(data.aws_iam_policy_document.alb_logs[0].json, "logdelivery.elasticloadbalancing.amazonaws.com") && strcontains(data.aws_iam_policy_document.alb_logs[0].json, "wisp/AWSLogs/123456789012/*")
    error_message = "the bucket policy lets Elastic Load Balancing deliver under <name>/AWSLogs/<account>/"
  }
  assert {
    condition     = one(one(aws_s3_bucket_server_side_encryption_configuration.alb_logs[0].rule).apply_server_side_encryption_by_default).sse_algorithm == "AES256" && aws_s3_bucket_lifecycle_configuration.alb_logs[0].rule[0].expiration[0].days == 90
    error_message = "SSE-S3 (all ALB log delivery supports) and expiry"
  }
}

run "access_logs_to_the_operators_bucket" {
  command = plan

  variables {
    alb_access_logs_bucket = "our-logs"
  }

  assert {
    condition     = length(aws_s3_bucket.alb_logs) == 0 && aws_lb.this.access_logs[0].bucket == "our-logs"
    error_message = "logs go to the given bucket, none is created"
  }
}

run "iam_path_and_boundary" {
  command = plan

  variables {
    iam_role_path                = "/wisp/"
    iam_permissions_boundary_arn = "arn:aws:iam::123456789012:policy/boundary"
  }

  assert {
    condition     = length(aws_iam_role.function) == 5 && alltrue([for r in aws_iam_role.function : r.path == "/wisp/" && r.permissions_boundary == "arn:aws:iam::123456789012:policy/boundary"])
    error_message = "every role has the path and the boundary"
  }
}

# The key is generated at apply (uuid()), so planning needs no AWS call: these runs have
# no reachable AWS at all.
run "generated_key_plans_offline" {
  command = plan

  variables {
    generate_encryption_key = true
  }

  assert {
    condition     = length(aws_secretsmanager_secret_version.encryption_key) == 1 && aws_secretsmanager_secret_version.encryption_key[0].secret_string_wo_version == 1
    error_message = "the key's secret version is planned without credentials"
  }
}

