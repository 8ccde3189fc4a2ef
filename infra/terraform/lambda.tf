resource "aws_cloudwatch_log_group" "function" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (30 by default): a year of request logs costs more than the control plane itself.
  for_each          = local.functions
  name              = "/aws/lambda/${var.name}-${each.key}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
  tags              = local.tags
}

# Artifacts: `cargo lambda build --arm64 --output-format zip` writes
# <artifacts_dir>/<binary>/bootstrap.zip (a zip holding `bootstrap`), which is uploaded
# as is; no archive provider is needed.
resource "aws_lambda_function" "this" {
  #checkov:skip=CKV_AWS_116:ALB invocations are synchronous (no DLQ applies); the jobs are idempotent and the next scheduled run redoes a failed one.
  #checkov:skip=CKV_AWS_272:Code signing needs a signing profile the operator owns; the artifacts come from the operator's own build.
  for_each = local.functions

  function_name = "${var.name}-${each.key}"
  # config_revision is part of the configuration, so that changing it publishes a new
  # version (publish = true) and moves the live alias: the functions then start afresh and
  # read the config secret's current value (docs/DEPLOY.md, "After changing the config").
  description = var.config_revision == null ? "Wisp ${each.key} (${each.value})" : "Wisp ${each.key} (${each.value}), config ${var.config_revision}"
  role        = aws_iam_role.function[each.key].arn

  package_type     = "Zip" # the provider's default, stated (tests/release.tftest.hcl)
  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = "${var.artifacts_dir}/${each.value}/bootstrap.zip"
  source_code_hash = filebase64sha256("${var.artifacts_dir}/${each.value}/bootstrap.zip")

  memory_size                    = local.memory_size[each.key]
  timeout                        = local.timeout[each.key]
  reserved_concurrent_executions = lookup(var.reserved_concurrency, each.key, -1)
  kms_key_arn                    = var.kms_key_arn
  # Every change is a new version; the live alias (below) says which one serves.
  publish = true

  environment {
    variables = merge(
      {
        WISP_CONFIG_SECRET = aws_secretsmanager_secret.config.arn
        WISP_LOG           = var.log_level
        # The functions' metrics (Embedded Metric Format) land in this namespace with the
        # dimensions Deployment and Function, which alarms.tf and dashboard.tf read.
        WISP_METRICS_NAMESPACE = local.metrics_namespace
        WISP_DEPLOYMENT        = var.name
        WISP_METRICS_DETAIL    = var.metrics_detail
      },
      contains(local.needs_encryption_key, each.key) ? {
        WISP_ENCRYPTION_KEY_SECRET = aws_secretsmanager_secret.encryption_key.arn
      } : {},
      each.key == "http" && var.web_prefix != null ? {
        WISP_WEB_PREFIX = var.web_prefix
      } : {},
      # The pipeds' OTLP spans, relayed by the function that checks their tokens.
      each.key == "piped-api" && var.otlp_endpoint != null ? {
        WISP_OTLP_ENDPOINT = var.otlp_endpoint
      } : {},
      # The functions that save projects' SSO settings (web-api) and call the provider
      # (http) judge its addresses alike.
      contains(["web-api", "http"], each.key) ? {
        WISP_SSO_ALLOW_PRIVATE_ADDRESSES = tostring(var.sso_allow_private_addresses)
      } : {},
      contains(local.in_process_cache_functions, each.key) ? {
        WISP_CACHE = "MEMORY"
      } : {},
    )
  }

  dynamic "vpc_config" {
    for_each = contains(local.vpc_functions, each.key) ? [1] : []
    content {
      subnet_ids         = var.private_subnet_ids
      security_group_ids = [aws_security_group.lambda[0].id]
    }
  }

  # PassThrough is Lambda's default (no traces of its own); Active records the sampled
  # invocations, init included.
  tracing_config {
    mode = var.enable_xray ? "Active" : "PassThrough"
  }

  logging_config {
    log_format = "Text" # the functions already write JSON lines
    log_group  = aws_cloudwatch_log_group.function[each.key].name
  }

  tags = local.tags

  depends_on = [
    aws_iam_role_policy.function,
    aws_iam_role_policy_attachment.vpc_access,
    aws_iam_role_policy_attachment.xray,
  ]

  lifecycle {
    # In the VPC without NAT the SSO exchange with GitHub or the OIDC provider has no
    # route out and times out, while static login still works.
    precondition {
      condition     = each.key != "http" || !contains(local.vpc_functions, "http") || var.create_nat_gateway || !var.create_vpc_endpoints
      error_message = "http in redis_functions puts the http function in the VPC, where its SSO exchange needs a route to the internet: set create_nat_gateway = true, or create_vpc_endpoints = false if private_subnet_ids already route through a NAT gateway of yours; or leave http out of redis_functions (the default)."
    }
  }
}

# The version the load balancer and the schedules invoke. `terraform apply` points it at
# the version just published; `aws lambda update-alias --function-version <previous>` rolls
# a function back at once (docs/DEPLOY.md "Rolling back").
resource "aws_lambda_alias" "live" {
  for_each         = local.functions
  name             = local.alias_name
  description      = "The version the load balancer and the schedules invoke"
  function_name    = aws_lambda_function.this[each.key].function_name
  function_version = aws_lambda_function.this[each.key].version
}
