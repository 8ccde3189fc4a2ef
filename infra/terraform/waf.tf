# An optional WAF web ACL on the load balancer: the operator's own (waf_web_acl_arn), or
# one the module creates (create_waf_web_acl) with a single rate-based rule on /auth/*.
#
# /auth/* is the console's static login and SSO callback: internet-facing, and the login
# throttle counts failures per function instance (shared/services/src/web/logins.rs), so a
# guesser spread over many instances gets more tries. The rule caps each client address
# at waf_auth_rate_limit requests per 5 minutes across all instances. Nothing else is
# inspected: the gRPC-web bodies of the pipeds and pipectl are binary protobuf, on which
# AWS's body-inspecting managed rule groups (core rule set, SQL injection) misfire.

locals {
  create_waf      = var.create_waf_web_acl && var.waf_web_acl_arn == null
  waf_web_acl_arn = var.waf_web_acl_arn != null ? var.waf_web_acl_arn : (local.create_waf ? aws_wafv2_web_acl.this[0].arn : null)
}

resource "aws_wafv2_web_acl" "this" {
  #checkov:skip=CKV2_AWS_31:WAF logging needs a log destination (aws-waf-logs-*) and is billed per GB; the sampled requests and CloudWatch metrics below show what the rule blocks.
  #checkov:skip=CKV_AWS_192:The Log4j managed rules inspect bodies, and the pipeds' gRPC-web bodies are binary protobuf; nothing behind this load balancer runs Java.
  count       = local.create_waf ? 1 : 0
  name        = var.name
  description = "Wisp: rate limit on /auth/ paths per client address"
  scope       = "REGIONAL"

  default_action {
    allow {}
  }

  rule {
    name     = "auth-rate-limit"
    priority = 10

    action {
      block {}
    }

    statement {
      rate_based_statement {
        limit                 = var.waf_auth_rate_limit
        evaluation_window_sec = 300
        aggregate_key_type    = "IP"

        scope_down_statement {
          byte_match_statement {
            search_string         = "/auth/"
            positional_constraint = "STARTS_WITH"
            field_to_match {
              uri_path {}
            }
            text_transformation {
              priority = 0
              type     = "NONE"
            }
          }
        }
      }
    }

    visibility_config {
      cloudwatch_metrics_enabled = true
      metric_name                = "${var.name}-auth-rate-limit"
      sampled_requests_enabled   = true
    }
  }

  visibility_config {
    cloudwatch_metrics_enabled = true
    metric_name                = var.name
    sampled_requests_enabled   = true
  }

  tags = local.tags
}

resource "aws_wafv2_web_acl_association" "this" {
  count        = var.waf_web_acl_arn != null || local.create_waf ? 1 : 0
  resource_arn = aws_lb.this.arn
  web_acl_arn  = local.waf_web_acl_arn
}
