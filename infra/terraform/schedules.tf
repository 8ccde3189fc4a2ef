# One EventBridge rule per job (var.job_schedules), each invoking the jobs function with
# the constant input {"job": "<name>"} (shared/jobs, README "Scheduled jobs").
resource "aws_cloudwatch_event_rule" "job" {
  for_each            = local.jobs
  name                = "${var.name}-${each.key}"
  description         = "Wisp job ${each.key}"
  schedule_expression = each.value
  tags                = local.tags
}

resource "aws_cloudwatch_event_target" "job" {
  for_each = local.jobs
  rule     = aws_cloudwatch_event_rule.job[each.key].name
  arn      = aws_lambda_alias.live["jobs"].arn
  input    = jsonencode({ job = each.key })

  retry_policy {
    # A missed run is redone by the next one (every job resumes where it stopped).
    maximum_retry_attempts       = 0
    maximum_event_age_in_seconds = 60
  }
}

resource "aws_lambda_permission" "job" {
  for_each      = local.jobs
  statement_id  = "AllowEventBridge-${each.key}"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.this["jobs"].function_name
  qualifier     = aws_lambda_alias.live["jobs"].name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.job[each.key].arn
}

# Lambda retries failed asynchronous invocations twice by default; a job's next scheduled
# run does the same work, so retries would only overlap it.
resource "aws_lambda_function_event_invoke_config" "jobs" {
  function_name                = aws_lambda_function.this["jobs"].function_name
  qualifier                    = aws_lambda_alias.live["jobs"].name
  maximum_retry_attempts       = 0
  maximum_event_age_in_seconds = 300
}
