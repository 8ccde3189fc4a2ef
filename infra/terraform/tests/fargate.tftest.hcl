# `terraform test` of compute = "fargate" (fargate.tf), planned offline as
# module.tftest.hcl does (same provider settings and overrides), and of what a switch
# between the modes keeps: the table, bucket and secrets at the same addresses, with the
# same names (docs/DEPLOY.md "Fargate").

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

override_data {
  target = data.aws_elb_service_account.current
  values = { arn = "arn:aws:iam::127311923021:root" }
}

override_data {
  target = data.aws_vpc.this
  values = { cidr_block = "10.0.0.0/16" }
}

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
  target          = aws_dynamodb_table.this
  override_during = plan
  values          = { arn = "arn:aws:dynamodb:us-east-1:123456789012:table/wisp" }
}

override_resource {
  target          = aws_s3_bucket.this
  override_during = plan
  values          = { arn = "arn:aws:s3:::wisp-123456789012-us-east-1" }
}

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
  target          = aws_lb_target_group.grpc
  override_during = plan
  values = {
    arn        = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/wisp-grpc/0123456789abcdef"
    arn_suffix = "targetgroup/wisp-grpc/0123456789abcdef"
  }
}

override_resource {
  target          = aws_lb_target_group.web
  override_during = plan
  values = {
    arn        = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/wisp-web/0123456789abcdef"
    arn_suffix = "targetgroup/wisp-web/0123456789abcdef"
  }
}

override_resource {
  target          = aws_lambda_alias.live
  override_during = plan
  values          = { arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-fn:live" }
}

variables {
  artifacts_dir      = "./tests/artifacts"
  vpc_id             = "vpc-0123456789abcdef0"
  alb_subnet_ids     = ["subnet-a", "subnet-b"]
  private_subnet_ids = ["subnet-private-a", "subnet-private-b"]
  certificate_arn    = "arn:aws:acm:us-east-1:123456789012:certificate/test"
  domain_name        = "pipecd.example.com"
}

# The default mode, as a reference for the switch below.
run "lambda_mode" {
  command = plan

  assert {
    condition     = length(aws_lambda_function.this) == 5 && length(aws_ecs_service.serve) == 0 && length(aws_lb_target_group.grpc) == 0 && length(aws_lb_listener_rule.grpc) == 0 && length(aws_iam_role.task) == 0
    error_message = "compute = lambda (the default): five functions, nothing of ECS"
  }
  assert {
    condition     = output.ecs_service_name == null && output.task_role_arn == null
    error_message = "no ECS outputs in lambda mode"
  }
}

run "fargate_mode" {
  command = plan

  variables {
    compute = "fargate"
    fargate = { image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/wisp:0.1.0" }
  }

  # What serves: the tasks; of the functions only the jobs one, still on its schedules.
  assert {
    condition     = keys(aws_lambda_function.this) == ["jobs"] && length(aws_lb_target_group.function) == 0 && length(aws_lb_listener_rule.route) == 0 && length(aws_lambda_permission.alb) == 0
    error_message = "fargate: only the jobs function, no Lambda target groups nor routes"
  }
  assert {
    condition     = length(aws_cloudwatch_event_rule.job) == 5 && alltrue([for t in aws_cloudwatch_event_target.job : t.arn == "arn:aws:lambda:us-east-1:123456789012:function:wisp-fn:live"])
    error_message = "the jobs stay on EventBridge and the jobs function"
  }

  # The task: arm64, the image, `wisp serve` reading the functions' secrets, no jobs.
  assert {
    condition     = aws_ecs_task_definition.serve[0].runtime_platform[0].cpu_architecture == "ARM64" && aws_ecs_task_definition.serve[0].requires_compatibilities == toset(["FARGATE"]) && aws_ecs_task_definition.serve[0].network_mode == "awsvpc"
    error_message = "a Fargate arm64 task"
  }
  assert {
    condition     = jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].image == "123456789012.dkr.ecr.us-east-1.amazonaws.com/wisp:0.1.0" && jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].command == ["serve"]
    error_message = "the given image, running wisp serve"
  }
  assert {
    condition = { for e in jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].environment : e.name => e.value } == {
      AWS_REGION                       = "us-east-1"
      WISP_ADDR                        = "0.0.0.0:8080"
      WISP_CONFIG_SECRET               = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/config-AbCdEf"
      WISP_ENCRYPTION_KEY_SECRET       = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/encryption-key-AbCdEf"
      WISP_LOG                         = "info"
      WISP_NO_JOBS                     = "true"
      WISP_SSO_ALLOW_PRIVATE_ADDRESSES = "false"
      WISP_TRUSTED_PROXIES             = "10.0.0.0/16"
      WISP_WEB_PREFIX                  = "console/"
    }
    error_message = "the task reads the functions' config and key secrets, serves the console from web_prefix, runs no jobs"
  }
  assert {
    condition     = jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].stopTimeout == 30 && jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].portMappings[0].containerPort == 8080
    error_message = "30 s from SIGTERM to SIGKILL (wisp serve drains for at most 10 s), port 8080"
  }

  # On-demand Fargate by default (fargate_capacity): a capacity provider strategy, not a
  # launch type, so that a move to Spot updates the service in place; both providers on
  # the cluster.
  assert {
    condition     = [for s in aws_ecs_service.serve[0].capacity_provider_strategy : { provider = s.capacity_provider, base = s.base, weight = s.weight }] == [{ provider = "FARGATE", base = 0, weight = 1 }] && aws_ecs_service.serve[0].force_new_deployment
    error_message = "on-demand: every task on FARGATE through the service's strategy"
  }
  assert {
    condition     = aws_ecs_cluster_capacity_providers.this[0].capacity_providers == toset(["FARGATE", "FARGATE_SPOT"]) && aws_ecs_cluster_capacity_providers.this[0].cluster_name == "wisp"
    error_message = "the cluster offers both Fargate capacity providers"
  }

  # The service: two tasks at least, across the private subnets, rolled back when a
  # deployment fails, autoscaled on CPU and requests per task.
  assert {
    condition     = aws_ecs_service.serve[0].desired_count == 2 && aws_ecs_service.serve[0].network_configuration[0].subnets == toset(["subnet-private-a", "subnet-private-b"]) && !aws_ecs_service.serve[0].network_configuration[0].assign_public_ip
    error_message = "two tasks in the private subnets"
  }
  assert {
    condition     = aws_ecs_service.serve[0].deployment_circuit_breaker[0].enable && aws_ecs_service.serve[0].deployment_circuit_breaker[0].rollback && aws_ecs_service.serve[0].deployment_minimum_healthy_percent == 100
    error_message = "the deployment circuit breaker with rollback"
  }
  assert {
    condition     = length(aws_ecs_service.serve[0].load_balancer) == 2 && toset([for lb in aws_ecs_service.serve[0].load_balancer : lb.target_group_arn]) == toset([aws_lb_target_group.grpc[0].arn, aws_lb_target_group.web[0].arn])
    error_message = "the tasks in both target groups"
  }
  assert {
    condition     = aws_appautoscaling_target.serve[0].min_capacity == 2 && aws_appautoscaling_target.serve[0].max_capacity == 10 && aws_appautoscaling_policy.cpu[0].target_tracking_scaling_policy_configuration[0].predefined_metric_specification[0].predefined_metric_type == "ECSServiceAverageCPUUtilization"
    error_message = "autoscaling between 2 and 10 tasks on CPU"
  }
  assert {
    condition     = aws_appautoscaling_policy.requests[0].target_tracking_scaling_policy_configuration[0].predefined_metric_specification[0].predefined_metric_type == "ALBRequestCountPerTarget" && aws_appautoscaling_policy.requests[0].target_tracking_scaling_policy_configuration[0].predefined_metric_specification[0].resource_label == "app/wisp/0123456789abcdef/targetgroup/wisp-grpc/0123456789abcdef" && aws_appautoscaling_policy.requests[0].target_tracking_scaling_policy_configuration[0].target_value == 60000
    error_message = "autoscaling on the gRPC target group's requests per task"
  }

  # The load balancer: native gRPC for PipedService and APIService, HTTP for the rest.
  assert {
    condition     = aws_lb_target_group.grpc[0].protocol_version == "GRPC" && aws_lb_target_group.grpc[0].target_type == "ip" && aws_lb_target_group.grpc[0].health_check[0].matcher == "0" && aws_lb_target_group.grpc[0].health_check[0].path == "/grpc.health.v1.Health/Check"
    error_message = "a gRPC target group of task addresses, checked with the standard gRPC health check"
  }
  assert {
    condition     = alltrue([for g in [aws_lb_target_group.grpc[0], aws_lb_target_group.web[0]] : g.health_check[0].interval == 15 && g.health_check[0].unhealthy_threshold == 3]) && !contains([for e in jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].environment : e.name], "WISP_SHUTDOWN_DELAY")
    error_message = "on-demand: no shutdown delay (ECS deregisters a task before its SIGTERM), health checks every 15 s"
  }
  assert {
    condition     = aws_lb_target_group.web[0].protocol_version == "HTTP1" && aws_lb_target_group.web[0].health_check[0].path == "/healthz" && aws_lb_target_group.web[0].health_check[0].matcher == "200"
    error_message = "an HTTP target group checked on /healthz"
  }
  assert {
    condition     = aws_lb_listener.https.default_action[0].target_group_arn == aws_lb_target_group.web[0].arn && aws_lb_listener.https.protocol == "HTTPS"
    error_message = "the HTTPS listener's default action is the tasks' HTTP target group"
  }
  assert {
    condition = keys(aws_lb_listener_rule.grpc) == ["api", "piped-api"] && alltrue([for k, r in aws_lb_listener_rule.grpc : r.action[0].target_group_arn == aws_lb_target_group.grpc[0].arn]) && toset(flatten([for r in aws_lb_listener_rule.grpc : [for c in r.condition : try(c.path_pattern[0].values, [])]])) == toset([
      "/grpc.service.pipedservice.PipedService/*", "/pipe.api.service.pipedservice.PipedService/*",
      "/grpc.service.apiservice.APIService/*", "/pipe.api.service.apiservice.APIService/*",
      "/opentelemetry.proto.collector.trace.v1.TraceService/*",
    ])
    error_message = "PipedService and APIService (both names), and the pipeds' span export, to the gRPC target group"
  }
  assert {
    condition     = alltrue([for r in aws_lb_listener_rule.grpc : anytrue([for c in r.condition : try(c.http_header[0].values, null) == toset(["application/grpc", "application/grpc+proto"])])])
    error_message = "only native gRPC goes to the gRPC target group (a bridge's gRPC-web goes to the HTTP one)"
  }

  # The task role: the serving functions' grants, each statement under its role's name;
  # not the jobs'.
  assert {
    condition = toset([for s in data.aws_iam_policy_document.task[0].statement : s.sid]) == toset([
      "PipedApiTable", "PipedApiQuery", "PipedApiBucket", "PipedApiObjects", "PipedApiSecrets",
      "ApiTable", "ApiQuery", "ApiBucket", "ApiObjects", "ApiRevocations", "ApiSecrets",
      "WebApiTable", "WebApiQuery", "WebApiBucket", "WebApiObjects", "WebApiRevocations", "WebApiSecrets",
      "HttpTable", "HttpBucket", "HttpObjects", "HttpRevocations", "HttpSecrets",
    ])
    error_message = "the task role holds exactly the serving roles' grants"
  }
  assert {
    condition     = one([for s in data.aws_iam_policy_document.task[0].statement : s if s.sid == "WebApiSecrets"]).resources == toset(["arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/config-AbCdEf", "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/encryption-key-AbCdEf"]) && !anytrue([for s in data.aws_iam_policy_document.task[0].statement : contains(s.actions, "s3:DeleteObject") || contains(s.actions, "dynamodb:DeleteItem")])
    error_message = "the tasks read both secrets and delete nothing (the jobs' DeleteObject stays with the jobs function)"
  }
  assert {
    condition     = alltrue([for s in data.aws_iam_policy_document.assume_ecs_tasks.statement : contains([for p in s.principals : one(p.identifiers)], "ecs-tasks.amazonaws.com")])
    error_message = "the task roles are for ECS tasks"
  }

  # Alarms: the load balancer's, the jobs', the table's, and the tasks' health; none for
  # functions that no longer exist.
  assert {
    condition     = length(aws_cloudwatch_metric_alarm.grpc_server_errors) == 0 && keys(aws_cloudwatch_metric_alarm.function_errors) == ["jobs"] && length(aws_cloudwatch_metric_alarm.alb) == 3 && keys(aws_cloudwatch_metric_alarm.unhealthy_tasks) == ["grpc", "web"]
    error_message = "fargate alarms"
  }

  # The switch keeps the data: the same table, bucket and secrets, at the same addresses
  # (they take no count in either mode) and with the same names as in lambda mode.
  assert {
    condition     = output.table_name == run.lambda_mode.table_name && output.bucket_name == run.lambda_mode.bucket_name && output.config_secret_name == run.lambda_mode.config_secret_name && output.config_secret_arn == run.lambda_mode.config_secret_arn && output.encryption_key_secret_arn == run.lambda_mode.encryption_key_secret_arn
    error_message = "both modes use the same table, bucket and secrets"
  }
  assert {
    condition     = aws_dynamodb_table.this.deletion_protection_enabled && output.ecs_service_name == "wisp-serve"
    error_message = "the table keeps its deletion protection; the service is named"
  }
}

run "fargate_needs_an_image" {
  command = plan

  variables {
    compute = "fargate"
  }

  expect_failures = [aws_ecs_task_definition.serve]
}

run "fargate_needs_two_private_subnets" {
  command = plan

  variables {
    compute            = "fargate"
    fargate            = { image = "wisp:0.1.0" }
    private_subnet_ids = ["subnet-private-a"]
  }

  expect_failures = [aws_ecs_task_definition.serve]
}

run "fargate_one_task_is_refused" {
  command = plan

  variables {
    compute = "fargate"
    fargate = { image = "wisp:0.1.0", min_tasks = 1 }
  }

  expect_failures = [var.fargate]
}

run "unknown_compute_is_refused" {
  command = plan

  variables {
    compute = "ec2"
  }

  expect_failures = [var.compute]
}

# Redis with Fargate: the tasks reach it through their own security group.
run "fargate_with_redis" {
  command = plan

  variables {
    compute                 = "fargate"
    fargate                 = { image = "wisp:0.1.0", cpu = 1024, memory = 2048, assign_public_ip = true }
    enable_redis            = true
    redis_auth_token        = "test-token-for-the-plan-only" #checkov:skip=CKV_SECRET_6:A stand-in for the plan-only test, not a credential.
    private_route_table_ids = ["rtb-a", "rtb-b"]
  }

  assert {
    condition     = length(aws_vpc_security_group_ingress_rule.redis_from_task) == 1 && length(aws_vpc_security_group_egress_rule.task_to_redis) == 1 && length(aws_iam_role_policy_attachment.vpc_access) == 1 && aws_ecs_task_definition.serve[0].cpu == "1024" && aws_ecs_service.serve[0].network_configuration[0].assign_public_ip
    error_message = "Redis reachable from the tasks; the jobs function alone in the VPC; the task size as given"
  }
}

# fargate_capacity = "spot": every task on Fargate Spot, which runs x86_64 only; the
# drain still fits in the two-minute reclaim notice.
run "fargate_spot" {
  command = plan

  variables {
    compute          = "fargate"
    fargate_capacity = "spot"
    fargate          = { image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/wisp@sha256:0123" }
  }

  assert {
    condition     = [for s in aws_ecs_service.serve[0].capacity_provider_strategy : { provider = s.capacity_provider, base = s.base, weight = s.weight }] == [{ provider = "FARGATE_SPOT", base = 0, weight = 1 }]
    error_message = "spot: every task on FARGATE_SPOT"
  }
  assert {
    condition     = aws_ecs_task_definition.serve[0].runtime_platform[0].cpu_architecture == "X86_64" && aws_ecs_task_definition.serve[0].runtime_platform[0].operating_system_family == "LINUX"
    error_message = "Fargate Spot runs Linux x86_64 tasks only"
  }
  assert {
    condition     = jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].image == "123456789012.dkr.ecr.us-east-1.amazonaws.com/wisp@sha256:0123" && jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].stopTimeout + aws_lb_target_group.grpc[0].deregistration_delay <= 120 && aws_lb_target_group.web[0].deregistration_delay == aws_lb_target_group.grpc[0].deregistration_delay
    error_message = "the given image; deregistration delay and stopTimeout within the two-minute notice"
  }
  assert {
    condition     = aws_ecs_service.serve[0].desired_count == 2 && aws_appautoscaling_target.serve[0].min_capacity == 2 && aws_ecs_service.serve[0].deployment_circuit_breaker[0].rollback
    error_message = "the rest of the service as on-demand: two tasks at least, rolled back on failure"
  }
  # A reclaimed task may stay registered: it serves on for 15 s with failing health
  # checks, which the load balancer notices within 10 s.
  assert {
    condition     = { for e in jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].environment : e.name => e.value }["WISP_SHUTDOWN_DELAY"] == "15s" && alltrue([for g in [aws_lb_target_group.grpc[0], aws_lb_target_group.web[0]] : g.health_check[0].interval * g.health_check[0].unhealthy_threshold <= 10 && g.health_check[0].timeout < g.health_check[0].interval])
    error_message = "spot: a shutdown delay the health checks notice within"
  }
}

# fargate_capacity = "mixed": on_demand_base tasks on FARGATE, all others on FARGATE_SPOT.
run "fargate_mixed" {
  command = plan

  variables {
    compute          = "fargate"
    fargate_capacity = "mixed"
    fargate          = { image = "wisp:0.1.0", on_demand_base = 2, min_tasks = 3 }
  }

  assert {
    condition = toset([for s in aws_ecs_service.serve[0].capacity_provider_strategy : { provider = s.capacity_provider, base = s.base, weight = s.weight }]) == toset([
      { provider = "FARGATE", base = 2, weight = 0 },
      { provider = "FARGATE_SPOT", base = 0, weight = 1 },
    ])
    error_message = "mixed: a base of on-demand tasks, the rest (weight) on Spot"
  }
  assert {
    condition     = aws_ecs_task_definition.serve[0].runtime_platform[0].cpu_architecture == "X86_64" && aws_ecs_service.serve[0].desired_count == 3
    error_message = "mixed: every task x86_64, the on-demand base too (one task definition)"
  }
}

run "fargate_mixed_base_defaults_to_one" {
  command = plan

  variables {
    compute          = "fargate"
    fargate_capacity = "mixed"
    fargate          = { image = "wisp:0.1.0" }
  }

  assert {
    condition     = one([for s in aws_ecs_service.serve[0].capacity_provider_strategy : s.base if s.capacity_provider == "FARGATE"]) == 1
    error_message = "mixed: one on-demand task unless on_demand_base says otherwise"
  }
}

run "unknown_fargate_capacity_is_refused" {
  command = plan

  variables {
    compute          = "fargate"
    fargate_capacity = "spot-only"
    fargate          = { image = "wisp:0.1.0" }
  }

  expect_failures = [var.fargate_capacity]
}

run "spot_with_lambda_is_refused" {
  command = plan

  variables {
    fargate_capacity = "spot"
  }

  expect_failures = [var.fargate_capacity]
}

# 30 s of deregistration delay and 100 s of stopTimeout do not fit in the notice.
run "spot_with_a_long_stop_timeout_is_refused" {
  command = plan

  variables {
    compute          = "fargate"
    fargate_capacity = "spot"
    fargate          = { image = "wisp:0.1.0", stop_timeout = 100 }
  }

  expect_failures = [aws_ecs_service.serve]
}

# The same stop_timeout is fine on-demand: an ordinary stop has no deadline.
run "on_demand_with_a_long_stop_timeout" {
  command = plan

  variables {
    compute = "fargate"
    fargate = { image = "wisp:0.1.0", stop_timeout = 100 }
  }

  assert {
    condition     = jsondecode(aws_ecs_task_definition.serve[0].container_definitions)[0].stopTimeout == 100
    error_message = "on-demand keeps Fargate's 120 s bound only"
  }
}

# Under Spot the shutdown delay (15 s) and the drain (10 s) must fit in stopTimeout.
run "spot_with_a_short_stop_timeout_is_refused" {
  command = plan

  variables {
    compute          = "fargate"
    fargate_capacity = "spot"
    fargate          = { image = "wisp:0.1.0", stop_timeout = 20 }
  }

  expect_failures = [aws_ecs_service.serve]
}

run "mixed_without_an_on_demand_task_is_refused" {
  command = plan

  variables {
    compute          = "fargate"
    fargate_capacity = "mixed"
    fargate          = { image = "wisp:0.1.0", on_demand_base = 0 }
  }

  expect_failures = [var.fargate]
}

run "mixed_all_on_demand_is_refused" {
  command = plan

  variables {
    compute          = "fargate"
    fargate_capacity = "mixed"
    fargate          = { image = "wisp:0.1.0", on_demand_base = 10 }
  }

  expect_failures = [aws_ecs_service.serve]
}
