# CloudWatch alarms (create_alarms), each notifying alarm_sns_topic_arn when it goes into
# ALARM and back to OK. They read what AWS publishes for the ALB, the functions and the
# table, plus one metric of Wisp's own: the gRPC calls the functions count in Embedded
# Metric Format lines (namespace local.metrics_namespace, dimensions Deployment = var.name,
# Function = the function key, code_class). Every period is 5 minutes and every alarm
# fires on a single period, except the jobs staleness alarm. docs/DEPLOY.md "Alarms and
# dashboard" says what each one means and what to check first; the descriptions say the
# same, as they arrive in the notification.

locals {
  alarm_actions = var.alarm_sns_topic_arn == null ? [] : [var.alarm_sns_topic_arn]

  # The gRPC functions are the routed ones: piped-api, api, web-api.
  # With compute = "fargate" no function answers gRPC (fargate.tf has the tasks' alarms).
  grpc_functions = var.create_alarms && !local.fargate ? toset(keys(local.routes)) : toset([])

  # The item operations the functions and the admin commands call (shared/store-aws):
  # SystemErrors is published per operation, so the alarm adds these up.
  dynamodb_operations = ["GetItem", "PutItem", "Query", "DeleteItem"]

  # The staleness alarm watches the deployment-chains schedule (every minute by default);
  # the other jobs run hours apart.
  watch_jobs = var.create_alarms && contains(keys(local.jobs), "deployment-chains")

  tail_logs = "aws logs tail /aws/lambda/${var.name}-"

  alb_alarms = {
    "alb-5xx" = {
      metric      = "HTTPCode_ELB_5XX_Count"
      threshold   = var.alarm_thresholds.alb_5xx
      description = "The load balancer answered 5xx itself, without a function's answer: mostly 502 when a function failed its init, crashed or timed out; also when a function was throttled or a target group has no function. Check first: the ${var.name}-alb-502 alarm and the functions' errors and throttles alarms, then the function logs (${local.tail_logs}<function>)."
    }
    "alb-target-5xx" = {
      metric      = "HTTPCode_Target_5XX_Count"
      threshold   = var.alarm_thresholds.alb_target_5xx
      description = "The functions answered HTTP 5xx. gRPC errors travel as grpc-status in HTTP 200 answers, so these are mostly the http function's: 503 when it cannot read the console's files from S3, 500 when an answer could not be produced. Check first: ${local.tail_logs}http for the failing path, then the bucket."
    }
    "alb-502" = {
      metric      = "HTTPCode_ELB_502_Count"
      threshold   = var.alarm_thresholds.alb_502
      description = "Init failures show here: a function that cannot start (the config secret is empty or does not parse, the encryption key is missing, the table or bucket is missing or not readable) fails the invocation and the load balancer answers 502. A crash or a timeout does the same. Check first: the functions' errors alarms say which function, and its log says why after 'init failed' (${local.tail_logs}<function>)."
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "alb" {
  for_each            = var.create_alarms ? local.alb_alarms : {}
  alarm_name          = "${var.name}-${each.key}"
  alarm_description   = each.value.description
  namespace           = "AWS/ApplicationELB"
  metric_name         = each.value.metric
  dimensions          = { LoadBalancer = aws_lb.this.arn_suffix }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = each.value.threshold
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching" # no data: no request failed
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

# Errors of the jobs function are failed job runs: the function fails the invocation with
# error type StoreFailure or BadEvent (shared/lambda/src/jobs.rs).
resource "aws_cloudwatch_metric_alarm" "function_errors" {
  for_each   = var.create_alarms ? local.functions : {}
  alarm_name = each.key == "jobs" ? "${var.name}-job-failures" : "${var.name}-${each.key}-errors"
  alarm_description = (each.key == "jobs"
    ? "Job runs failed: the jobs function fails its invocation with error type StoreFailure (DynamoDB or S3 failed the run) or BadEvent (a schedule's input names no known job), and with a failed init. The next scheduled run redoes the work, so one failure can pass; repeated ones mean the jobs are not getting done. Check first: ${local.tail_logs}jobs for the failing job and its errorType."
    : "Invocations of ${var.name}-${each.key} failed: a failed init, a panic or a timeout (gRPC errors are answers, not function errors). The load balancer answered them with 502. Check first: ${local.tail_logs}${each.key} for 'init failed', 'panicked' or 'Task timed out'."
  )
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.this[each.key].function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = each.key == "jobs" ? var.alarm_thresholds.job_failures : var.alarm_thresholds.function_errors
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "function_throttles" {
  for_each   = var.create_alarms ? local.functions : {}
  alarm_name = "${var.name}-${each.key}-throttles"
  alarm_description = (each.key == "jobs"
    ? "Invocations of ${var.name}-jobs were refused for lack of concurrency (Lambda retries scheduled invocations for up to 5 minutes, then the run is lost until the next one). The function's reserved concurrency (reserved_concurrency) or the account's concurrent-executions quota was reached. Check first: the account's ConcurrentExecutions metric and the Lambda quota in Service Quotas."
    : "Invocations of ${var.name}-${each.key} were refused for lack of concurrency, and the load balancer answered those calls with an error. The function's reserved concurrency (reserved_concurrency) or the account's concurrent-executions quota (as low as 10 on new accounts) was reached. Check first: the account's ConcurrentExecutions metric and the Lambda quota in Service Quotas."
  )
  namespace           = "AWS/Lambda"
  metric_name         = "Throttles"
  dimensions          = { FunctionName = aws_lambda_function.this[each.key].function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = var.alarm_thresholds.function_throttles
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

# No invocation at all in jobs_stale_minutes, though deployment-chains is scheduled every
# minute: one-minute periods, all of them empty. Missing data is the signal here.
resource "aws_cloudwatch_metric_alarm" "jobs_stale" {
  count               = local.watch_jobs ? 1 : 0
  alarm_name          = "${var.name}-jobs-stale"
  alarm_description   = "The jobs function was not invoked for ${var.alarm_thresholds.jobs_stale_minutes} minutes, though the deployment-chains job is scheduled every minute: deployment chains stop advancing and no other job runs. The EventBridge rules are disabled or gone, or cannot invoke the function. Check first: aws events describe-rule --name ${var.name}-deployment-chains (State ENABLED), the rule's FailedInvocations metric and the ${var.name}-jobs-throttles alarm."
  namespace           = "AWS/Lambda"
  metric_name         = "Invocations"
  dimensions          = { FunctionName = aws_lambda_function.this["jobs"].function_name }
  statistic           = "Sum"
  period              = 60
  evaluation_periods  = var.alarm_thresholds.jobs_stale_minutes
  datapoints_to_alarm = var.alarm_thresholds.jobs_stale_minutes
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

# On-demand tables throttle when traffic more than doubles its previous peak within 30
# minutes or one partition is hot. The table-level events (no index dimension) are the
# ones callers feel.
resource "aws_cloudwatch_metric_alarm" "dynamodb_throttles" {
  for_each            = var.create_alarms ? { read = "ReadThrottleEvents", write = "WriteThrottleEvents" } : {}
  alarm_name          = "${var.name}-dynamodb-${each.key}-throttles"
  alarm_description   = "DynamoDB throttled ${each.key}s on the table ${local.table_name}. On-demand tables throttle when traffic more than doubles its previous peak within 30 minutes, or on one hot partition. The SDK retries; what is still refused reaches callers as UNAVAILABLE (the gRPC server errors alarms). Check first: the dashboard's DynamoDB widget for a jump in consumed capacity and which function drove it (Invocations)."
  namespace           = "AWS/DynamoDB"
  metric_name         = each.value
  dimensions          = { TableName = aws_dynamodb_table.this.name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = var.alarm_thresholds.dynamodb_throttles
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

# SystemErrors exists only per operation (TableName + Operation): a metric-math sum over
# the operations Wisp calls. CloudWatch bills such an alarm per metric it reads.
resource "aws_cloudwatch_metric_alarm" "dynamodb_system_errors" {
  count               = var.create_alarms ? 1 : 0
  alarm_name          = "${var.name}-dynamodb-system-errors"
  alarm_description   = "DynamoDB answered requests on the table ${local.table_name} with HTTP 500 (SystemErrors of ${join(", ", local.dynamodb_operations)}): a failure on AWS's side, not Wisp's. The SDK retries; what still fails reaches callers as UNAVAILABLE. Check first: the AWS Health Dashboard for DynamoDB in ${local.region}."
  evaluation_periods  = 1
  threshold           = var.alarm_thresholds.dynamodb_system_errors
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags

  metric_query {
    id          = "errors"
    expression  = "SUM([${join(", ", [for i, _ in local.dynamodb_operations : "m${i}"])}])"
    label       = "SystemErrors"
    return_data = true
  }

  dynamic "metric_query" {
    for_each = local.dynamodb_operations
    content {
      id = "m${metric_query.key}"
      metric {
        namespace   = "AWS/DynamoDB"
        metric_name = "SystemErrors"
        dimensions  = { TableName = aws_dynamodb_table.this.name, Operation = metric_query.value }
        stat        = "Sum"
        period      = 300
      }
    }
  }
}

# Wisp's own metric: calls answered INTERNAL, UNAVAILABLE, UNKNOWN, DATA_LOSS or
# DEADLINE_EXCEEDED (shared/telemetry grpc_code_class). No data means no such call.
resource "aws_cloudwatch_metric_alarm" "grpc_server_errors" {
  for_each          = local.grpc_functions
  alarm_name        = "${var.name}-${each.key}-grpc-server-errors"
  alarm_description = "gRPC calls to ${var.name}-${each.key} ended with a server error (INTERNAL, UNAVAILABLE, UNKNOWN, DATA_LOSS or DEADLINE_EXCEEDED; ${local.metrics_namespace}/wisp_grpc_requests_total, code_class server_error). Usually a store could not be reached or answered too slowly. Check first: ${local.tail_logs}${each.key} (failed calls are logged), then the DynamoDB alarms."
  namespace         = local.metrics_namespace
  metric_name       = "wisp_grpc_requests_total"
  dimensions = {
    Deployment = var.name
    Function   = each.key
    code_class = "server_error"
  }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = var.alarm_thresholds.grpc_server_errors
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

# Wisp's own metric: revocations that could not be recorded (a disable, a deletion of old
# keys or a logout answered UNAVAILABLE: other instances may still accept what it revoked)
# or read (checks fail closed: cached verifications are checked again, console sessions
# refused). Summed over the functions that record or read revocations. No data means none.
resource "aws_cloudwatch_metric_alarm" "revocation_failures" {
  count               = var.create_alarms ? 1 : 0
  alarm_name          = "${var.name}-revocation-failures"
  alarm_description   = "Revocations (disabled pipeds or API keys, deleted piped keys, console logouts) could not be written to, or read from, s3://${local.bucket_name}/revocations.json (${local.metrics_namespace}/wisp_revocation_failures_total). A failed write was answered UNAVAILABLE and the caller told to retry; while it cannot be read, pipeds and API keys are checked against the table on every call and console sessions are refused. Check first: ${local.tail_logs}<function> for \"revocation\" (the S3 error), the functions' S3 grants, and that the object is valid JSON."
  evaluation_periods  = 1
  threshold           = var.alarm_thresholds.revocation_failures
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags

  metric_query {
    id          = "failures"
    expression  = "SUM([${join(", ", [for i, _ in local.revocation_functions : "m${i}"])}])"
    label       = "wisp_revocation_failures_total"
    return_data = true
  }

  dynamic "metric_query" {
    for_each = local.revocation_functions
    content {
      id = "m${metric_query.key}"
      metric {
        namespace   = local.metrics_namespace
        metric_name = "wisp_revocation_failures_total"
        dimensions  = { Deployment = var.name, Function = metric_query.value }
        stat        = "Sum"
        period      = 300
      }
    }
  }
}

locals {
  # The functions that record (api, web-api, http: logout) or read revocations.
  revocation_functions = ["piped-api", "api", "web-api", "http"]
}

locals {
  # Every alarm the module created, for the alarm_names output and the tests.
  alarms = concat(
    values(aws_cloudwatch_metric_alarm.alb),
    values(aws_cloudwatch_metric_alarm.function_errors),
    values(aws_cloudwatch_metric_alarm.function_throttles),
    aws_cloudwatch_metric_alarm.jobs_stale,
    values(aws_cloudwatch_metric_alarm.dynamodb_throttles),
    aws_cloudwatch_metric_alarm.dynamodb_system_errors,
    values(aws_cloudwatch_metric_alarm.grpc_server_errors),
    aws_cloudwatch_metric_alarm.revocation_failures,
    values(aws_cloudwatch_metric_alarm.unhealthy_tasks),
  )
}
