# compute = "fargate": `wisp serve` (the container image, scripts/image) as an ECS service
# (arm64 on on-demand Fargate; x86_64 when fargate_capacity puts tasks on Fargate Spot)
# behind the same load balancer, on the same table, bucket and secrets. PipedService
# and APIService reach the tasks as native gRPC through a gRPC target group (pipeds and
# pipectl connect without `wisp bridge`); everything else (WebService's gRPC-web, the
# console, /auth/*, /healthz) through an HTTP target group. The scheduled jobs stay on
# EventBridge and the jobs function (schedules.tf); the tasks run with WISP_NO_JOBS
# (docs/DEPLOY.md "Fargate" says why). Nothing here exists with compute = "lambda".

locals {
  fargate_count = local.fargate ? 1 : 0

  # The port `wisp serve` listens on inside the task (h2c gRPC and HTTP/1.1 on one port).
  task_port = 8080

  # Fargate Spot runs only Linux x86_64 tasks; one task definition serves every task of
  # the service, so with any task on Spot all of them are x86_64 (the on-demand base of
  # "mixed" too). On-demand alone stays on arm64, a fifth cheaper per vCPU-hour.
  spot              = var.fargate_capacity != "on-demand"
  task_architecture = local.spot ? "X86_64" : "ARM64"

  # The service's capacity provider strategy. Always a strategy, never `launch_type`
  # (the two exclude each other): a move between the three values is then an update of
  # the strategy in place (a new deployment, force_new_deployment below), not a
  # replacement of the service. "mixed": the first on_demand_base tasks on FARGATE
  # (weight 0: none beyond the base), every further one on FARGATE_SPOT, so a reclaim
  # of Spot capacity never takes the service to zero tasks.
  capacity_strategy = {
    "on-demand" = [{ capacity_provider = "FARGATE", base = 0, weight = 1 }]
    spot        = [{ capacity_provider = "FARGATE_SPOT", base = 0, weight = 1 }]
    mixed = [
      { capacity_provider = "FARGATE", base = var.fargate.on_demand_base, weight = 0 },
      { capacity_provider = "FARGATE_SPOT", base = 0, weight = 1 },
    ]
  }[var.fargate_capacity]

  # Seconds the load balancer keeps a stopping task's in-flight requests (both target
  # groups). With Spot, this delay and stopTimeout together must fit in the two minutes
  # between the reclaim notice (SIGTERM) and the task's end: the service checks it.
  task_deregistration_delay = 30
  spot_notice_seconds       = 120

  # A reclaimed Spot task gets SIGTERM with the notice and may stay registered until it
  # stops: for this long after SIGTERM `wisp serve` goes on serving with its health checks
  # failing (WISP_SHUTDOWN_DELAY), and with Spot the checks run often enough
  # (health_check_interval × health_unhealthy_threshold, 10 s) for the load balancer to
  # stop routing to it within that time. stopTimeout must hold it and the 10 s drain.
  task_shutdown_delay        = local.spot ? 15 : 0
  health_check_interval      = local.spot ? 5 : 15
  health_unhealthy_threshold = local.spot ? 2 : 3

  # The roles whose grants the task role holds: every one that serves a route. Not the
  # jobs': the tasks run none (WISP_NO_JOBS).
  task_grant_roles = ["piped-api", "api", "web-api", "http"]

  # Native gRPC only: gRPC-web (application/grpc-web...) keeps to the HTTP target group,
  # so that pipeds still behind `wisp bridge` keep working while they move off it.
  grpc_content_types = ["application/grpc", "application/grpc+proto"]

  # What `wisp serve` reads, as the functions read it (lambda.tf): the same config and key
  # secrets, so the same table, bucket and sessions.
  task_environment = merge(
    {
      WISP_ADDR                        = "0.0.0.0:${local.task_port}"
      WISP_CONFIG_SECRET               = aws_secretsmanager_secret.config.arn
      WISP_ENCRYPTION_KEY_SECRET       = aws_secretsmanager_secret.encryption_key.arn
      WISP_NO_JOBS                     = "true"
      WISP_LOG                         = var.log_level
      WISP_SSO_ALLOW_PRIVATE_ADDRESSES = tostring(var.sso_allow_private_addresses)
      # Failed console logins are counted by the client's address, which the load
      # balancer (inside the VPC) gives in X-Forwarded-For.
      WISP_TRUSTED_PROXIES = local.fargate ? data.aws_vpc.this[0].cidr_block : ""
      AWS_REGION           = local.region
    },
    var.web_prefix != null ? { WISP_WEB_PREFIX = var.web_prefix } : {},
    local.task_shutdown_delay > 0 ? { WISP_SHUTDOWN_DELAY = "${local.task_shutdown_delay}s" } : {},
  )
}

data "aws_vpc" "this" {
  count = local.fargate_count
  id    = var.vpc_id
}

resource "aws_ecs_cluster" "this" {
  count = local.fargate_count
  name  = var.name

  setting {
    name  = "containerInsights"
    value = "enabled"
  }

  tags = local.tags
}

# Both Fargate capacity providers, whatever fargate_capacity says: a switch between its
# values then changes the service's strategy only, never the cluster under a running
# service. Anything started in the cluster without a strategy (`aws ecs run-task` of an
# admin command) runs on-demand.
resource "aws_ecs_cluster_capacity_providers" "this" {
  count              = local.fargate_count
  cluster_name       = aws_ecs_cluster.this[0].name
  capacity_providers = ["FARGATE", "FARGATE_SPOT"]

  default_capacity_provider_strategy {
    capacity_provider = "FARGATE"
    base              = 0
    weight            = 1
  }
}

resource "aws_cloudwatch_log_group" "task" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (30 by default), as the functions' logs.
  count             = local.fargate_count
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
  tags              = local.tags
}

# ---------------------------------------------------------------------------
# Roles: the task role holds the serving roles' grants (iam.tf local.grants), each
# statement under its role's name; the execution role pulls the image and writes the log.

data "aws_iam_policy_document" "assume_ecs_tasks" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

data "aws_iam_policy_document" "task" {
  count = local.fargate_count

  dynamic "statement" {
    for_each = flatten([
      for role in local.task_grant_roles : [
        for s in local.grants[role] : merge(s, { sid = "${replace(title(replace(role, "-", " ")), " ", "")}${s.sid}" })
      ]
    ])
    content {
      sid       = statement.value.sid
      actions   = statement.value.actions
      resources = statement.value.resources
    }
  }
}

resource "aws_iam_role" "task" {
  count                = local.fargate_count
  name                 = "${var.name}-task"
  description          = "Wisp serve tasks"
  path                 = var.iam_role_path
  permissions_boundary = var.iam_permissions_boundary_arn
  assume_role_policy   = data.aws_iam_policy_document.assume_ecs_tasks.json
  tags                 = local.tags
}

resource "aws_iam_role_policy" "task" {
  count  = local.fargate_count
  name   = "wisp-task"
  role   = aws_iam_role.task[0].id
  policy = data.aws_iam_policy_document.task[0].json
}

data "aws_iam_policy_document" "task_execution" {
  #checkov:skip=CKV_AWS_356:ecr:GetAuthorizationToken takes no resource; the image may live in any ECR repository the operator names.
  #checkov:skip=CKV_AWS_111:The ECR pull actions only read images.
  count = local.fargate_count

  statement {
    sid       = "Image"
    actions   = ["ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
    resources = ["*"]
  }

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.task[0].arn}:*"]
  }

  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [1]
    content {
      sid       = "Kms"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [var.kms_key_arn]
    }
  }
}

resource "aws_iam_role" "task_execution" {
  count                = local.fargate_count
  name                 = "${var.name}-task-execution"
  description          = "ECS pulling the Wisp image and writing its log"
  path                 = var.iam_role_path
  permissions_boundary = var.iam_permissions_boundary_arn
  assume_role_policy   = data.aws_iam_policy_document.assume_ecs_tasks.json
  tags                 = local.tags
}

resource "aws_iam_role_policy" "task_execution" {
  count  = local.fargate_count
  name   = "wisp-task-execution"
  role   = aws_iam_role.task_execution[0].id
  policy = data.aws_iam_policy_document.task_execution[0].json
}

# ---------------------------------------------------------------------------
# The task and the service

resource "aws_ecs_task_definition" "serve" {
  count                    = local.fargate_count
  family                   = "${var.name}-serve"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.fargate.cpu
  memory                   = var.fargate.memory
  task_role_arn            = aws_iam_role.task[0].arn
  execution_role_arn       = aws_iam_role.task_execution[0].arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = local.task_architecture
  }

  container_definitions = jsonencode([{
    name      = "wisp"
    image     = coalesce(var.fargate.image, "unset")
    essential = true
    # The image's entrypoint is /usr/local/bin/wisp.
    command      = ["serve"]
    environment  = [for k in sort(keys(local.task_environment)) : { name = k, value = local.task_environment[k] }]
    portMappings = [{ containerPort = local.task_port, protocol = "tcp" }]
    # `wisp serve` stops on SIGTERM: no new connections, in-flight calls finish (for at most
    # 10 s), HTTP/2 connections get GOAWAY so that pipeds reconnect to another task.
    stopTimeout            = var.fargate.stop_timeout
    readonlyRootFilesystem = true
    user                   = "65532:65532"
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.task[0].name
        awslogs-region        = local.region
        awslogs-stream-prefix = "serve"
      }
    }
  }])

  tags = local.tags

  lifecycle {
    precondition {
      condition     = var.fargate.image != null
      error_message = "compute = \"fargate\" needs fargate.image: the image scripts/image builds (${local.spot ? "amd64: fargate_capacity puts tasks on Fargate Spot, which runs x86_64 only; --arch all or amd64" : "arm64"}), pushed to a registry the tasks can pull from (e.g. <account>.dkr.ecr.<region>.amazonaws.com/wisp:<version>)."
    }
    precondition {
      condition     = length(var.private_subnet_ids) >= 2
      error_message = "compute = \"fargate\" needs private_subnet_ids in at least two availability zones: the tasks run there, spread across them."
    }
  }
}

resource "aws_security_group" "task" {
  count       = local.fargate_count
  name        = "${var.name}-tasks"
  description = "Wisp serve tasks"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "task_from_alb" {
  count                        = local.fargate_count
  security_group_id            = aws_security_group.task[0].id
  description                  = "wisp serve from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = local.task_port
  to_port                      = local.task_port
  referenced_security_group_id = aws_security_group.alb.id
}

resource "aws_vpc_security_group_egress_rule" "alb_to_task" {
  count                        = local.fargate_count
  security_group_id            = aws_security_group.alb.id
  description                  = "wisp serve tasks"
  ip_protocol                  = "tcp"
  from_port                    = local.task_port
  to_port                      = local.task_port
  referenced_security_group_id = aws_security_group.task[0].id
}

# DynamoDB, S3, Secrets Manager, ECR, CloudWatch Logs and (for SSO) the identity provider.
resource "aws_vpc_security_group_egress_rule" "task_https" {
  count             = local.fargate_count
  security_group_id = aws_security_group.task[0].id
  description       = "HTTPS to AWS APIs and identity providers"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_egress_rule" "task_to_redis" {
  count                        = local.fargate && var.enable_redis ? 1 : 0
  security_group_id            = aws_security_group.task[0].id
  description                  = "Redis"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = aws_security_group.redis[0].id
}

resource "aws_vpc_security_group_ingress_rule" "redis_from_task" {
  count                        = local.fargate && var.enable_redis ? 1 : 0
  security_group_id            = aws_security_group.redis[0].id
  description                  = "Redis from the Wisp tasks"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = aws_security_group.task[0].id
}

resource "aws_ecs_service" "serve" {
  count                   = local.fargate_count
  name                    = "${var.name}-serve"
  cluster                 = aws_ecs_cluster.this[0].id
  task_definition         = aws_ecs_task_definition.serve[0].arn
  desired_count           = var.fargate.min_tasks
  platform_version        = "LATEST"
  propagate_tags          = "SERVICE"
  enable_ecs_managed_tags = true
  # A new task gets this long to answer its first health checks.
  health_check_grace_period_seconds = 60

  # fargate_capacity: on-demand Fargate, Fargate Spot, or an on-demand base and Spot.
  # The provider replaces a service whose strategy changes unless force_new_deployment
  # is set; with it, a changed strategy is a new deployment of the same service.
  dynamic "capacity_provider_strategy" {
    for_each = local.capacity_strategy
    content {
      capacity_provider = capacity_provider_strategy.value.capacity_provider
      base              = capacity_provider_strategy.value.base
      weight            = capacity_provider_strategy.value.weight
    }
  }
  force_new_deployment = true

  # Fargate spreads a service's tasks across the subnets' availability zones.
  network_configuration {
    subnets          = var.private_subnet_ids
    security_groups  = [aws_security_group.task[0].id]
    assign_public_ip = var.fargate.assign_public_ip
  }

  # A deployment whose tasks do not come up healthy is stopped and the previous task
  # definition restored.
  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  load_balancer {
    target_group_arn = aws_lb_target_group.grpc[0].arn
    container_name   = "wisp"
    container_port   = local.task_port
  }

  load_balancer {
    target_group_arn = aws_lb_target_group.web[0].arn
    container_name   = "wisp"
    container_port   = local.task_port
  }

  tags = local.tags

  # The autoscaling policies move desired_count.
  lifecycle {
    ignore_changes = [desired_count]

    # A Spot task gets SIGTERM with the reclaim notice and is gone two minutes later; it
    # may stay registered in the target groups until it stops (AWS's note on Fargate Spot
    # behind a load balancer). The drain as an ordinary stop runs it (the deregistration
    # delay, then stopTimeout) must fit in those two minutes.
    precondition {
      condition     = !local.spot || local.task_deregistration_delay + var.fargate.stop_timeout <= local.spot_notice_seconds
      error_message = "fargate_capacity = \"${var.fargate_capacity}\" puts tasks on Fargate Spot, which stops a reclaimed task two minutes (${local.spot_notice_seconds} s) after its notice: the target groups' deregistration delay (${local.task_deregistration_delay} s) plus fargate.stop_timeout (${var.fargate.stop_timeout} s) must fit in it; set stop_timeout to at most ${local.spot_notice_seconds - local.task_deregistration_delay}."
    }
    precondition {
      condition     = var.fargate.stop_timeout >= local.task_shutdown_delay + 10
      error_message = "fargate_capacity = \"${var.fargate_capacity}\": after SIGTERM the tasks serve on for ${local.task_shutdown_delay} s with failing health checks (WISP_SHUTDOWN_DELAY), then drain for up to 10 s; set fargate.stop_timeout to at least ${local.task_shutdown_delay + 10}."
    }
    precondition {
      condition     = var.fargate_capacity != "mixed" || var.fargate.on_demand_base < var.fargate.max_tasks
      error_message = "fargate.on_demand_base (${var.fargate.on_demand_base}) is not below fargate.max_tasks (${var.fargate.max_tasks}): no task would ever run on Spot; use fargate_capacity = \"on-demand\" instead."
    }
  }

  depends_on = [aws_lb_listener.https, aws_lb_listener_rule.grpc, aws_iam_role_policy.task, aws_ecs_cluster_capacity_providers.this]
}

# ---------------------------------------------------------------------------
# The load balancer's side: two target groups on the same tasks, and the gRPC rules.

resource "aws_lb_target_group" "grpc" {
  #checkov:skip=CKV_AWS_378:TLS ends at the load balancer's HTTPS listener; the tasks take h2c from it inside the VPC, their security group admitting only the load balancer.
  count            = local.fargate_count
  name             = "${var.name}-grpc"
  target_type      = "ip"
  vpc_id           = var.vpc_id
  port             = local.task_port
  protocol         = "HTTP"
  protocol_version = "GRPC"
  # The task gets SIGTERM after this: by then the load balancer sends it nothing new.
  # (Not so for a Spot reclaim, whose notice is the SIGTERM: docs/DEPLOY.md "Fargate Spot".)
  deregistration_delay = local.task_deregistration_delay

  # The standard gRPC health check: `wisp serve` answers OK (0) from the edge of its
  # stack, without reading a store, and UNAVAILABLE once it drains (SIGTERM). (The ALB's
  # default, a call to /AWS.ALB/healthcheck expecting UNIMPLEMENTED, gets HTTP 405: no
  # such route.) /healthz is the HTTP group's check. tests/e2e/iam_enforced.rs sends both
  # to the task.
  health_check {
    enabled             = true
    path                = "/grpc.health.v1.Health/Check"
    matcher             = "0"
    interval            = local.health_check_interval
    timeout             = 4
    healthy_threshold   = 2
    unhealthy_threshold = local.health_unhealthy_threshold
  }

  tags = local.tags
}

resource "aws_lb_target_group" "web" {
  #checkov:skip=CKV_AWS_378:TLS ends at the load balancer's HTTPS listener; the tasks take HTTP from it inside the VPC, their security group admitting only the load balancer.
  count                = local.fargate_count
  name                 = "${var.name}-web"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  port                 = local.task_port
  protocol             = "HTTP"
  protocol_version     = "HTTP1"
  deregistration_delay = local.task_deregistration_delay

  health_check {
    enabled             = true
    path                = "/healthz"
    matcher             = "200"
    interval            = local.health_check_interval
    timeout             = 4
    healthy_threshold   = 2
    unhealthy_threshold = local.health_unhealthy_threshold
  }

  tags = local.tags
}

# PipedService and APIService, native gRPC only (five values per rule at most: ALB's
# limit). OTLP/HTTP's /v1/traces is plain HTTP: it goes to the web group like the
# console, and the task serves it on the same port.
resource "aws_lb_listener_rule" "grpc" {
  for_each = local.fargate ? {
    for k in ["piped-api", "api"] : k => [for p in local.routes[k] : p if p != "/v1/traces"]
  } : {}
  listener_arn = aws_lb_listener.https.arn
  priority     = local.route_priority[each.key]

  action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.grpc[0].arn
  }

  condition {
    path_pattern {
      values = each.value
    }
  }

  condition {
    http_header {
      http_header_name = "content-type"
      values           = local.grpc_content_types
    }
  }

  tags = local.tags
}

# ---------------------------------------------------------------------------
# Autoscaling: on CPU and on requests per task (the pipeds' calls).

resource "aws_appautoscaling_target" "serve" {
  count              = local.fargate_count
  service_namespace  = "ecs"
  resource_id        = "service/${aws_ecs_cluster.this[0].name}/${aws_ecs_service.serve[0].name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = var.fargate.min_tasks
  max_capacity       = var.fargate.max_tasks
}

resource "aws_appautoscaling_policy" "cpu" {
  count              = local.fargate_count
  name               = "${var.name}-cpu"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.serve[0].service_namespace
  resource_id        = aws_appautoscaling_target.serve[0].resource_id
  scalable_dimension = aws_appautoscaling_target.serve[0].scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value = var.fargate.cpu_target
    predefined_metric_specification {
      predefined_metric_type = "ECSServiceAverageCPUUtilization"
    }
  }
}

resource "aws_appautoscaling_policy" "requests" {
  count              = local.fargate_count
  name               = "${var.name}-requests"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.serve[0].service_namespace
  resource_id        = aws_appautoscaling_target.serve[0].resource_id
  scalable_dimension = aws_appautoscaling_target.serve[0].scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value = var.fargate.requests_per_target
    predefined_metric_specification {
      predefined_metric_type = "ALBRequestCountPerTarget"
      resource_label         = "${aws_lb.this.arn_suffix}/${aws_lb_target_group.grpc[0].arn_suffix}"
    }
  }
}

# ---------------------------------------------------------------------------
# Alarms (create_alarms) beside alarms.tf's load balancer, jobs and table alarms, which
# stay as they are.

resource "aws_cloudwatch_metric_alarm" "unhealthy_tasks" {
  for_each          = var.create_alarms && local.fargate ? { grpc = aws_lb_target_group.grpc[0].arn_suffix, web = aws_lb_target_group.web[0].arn_suffix } : {}
  alarm_name        = "${var.name}-${each.key}-unhealthy-tasks"
  alarm_description = "Tasks of ${var.name}-serve fail the ${each.key} target group's health checks: a task that cannot read the config or key secret, the table or the bucket stops at start (its log says why after 'init failed'). Check first: aws logs tail /ecs/${var.name}, then aws ecs describe-services --cluster ${var.name} --services ${var.name}-serve (events)."
  namespace         = "AWS/ApplicationELB"
  metric_name       = "UnHealthyHostCount"
  dimensions = {
    LoadBalancer = aws_lb.this.arn_suffix
    TargetGroup  = each.value
  }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}
