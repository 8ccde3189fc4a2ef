# The load balancer: HTTPS with the given certificate, one Lambda target group per
# function it invokes, a listener rule per routed function (local.routes), and the http
# function as the default action (/healthz, /auth/*, the console's files).

resource "aws_security_group" "alb" {
  name        = "${var.name}-alb"
  description = "Wisp load balancer"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "alb_https" {
  for_each          = toset(var.alb_ingress_cidrs)
  security_group_id = aws_security_group.alb.id
  description       = "HTTPS from ${each.value}"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_ingress_rule" "alb_http" {
  for_each          = var.http_redirect ? toset(var.alb_ingress_cidrs) : toset([])
  security_group_id = aws_security_group.alb.id
  description       = "HTTP (redirected to HTTPS) from ${each.value}"
  ip_protocol       = "tcp"
  from_port         = 80
  to_port           = 80
  cidr_ipv4         = each.value
}

# Lambda targets are invoked through the Lambda service, not through an address in the
# VPC; HTTPS out keeps the invocation independent of how AWS routes it.
resource "aws_vpc_security_group_egress_rule" "alb_https" {
  security_group_id = aws_security_group.alb.id
  description       = "HTTPS to Lambda"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_lb" "this" {
  #checkov:skip=CKV2_AWS_28:A WAF web ACL is an input (waf_web_acl_arn, or create_waf_web_acl for the module's /auth/* rate rule): its cost is the operator's choice, and every route authenticates its callers.
  #checkov:skip=CKV2_AWS_76:The module's web ACL (create_waf_web_acl) only rate-limits /auth/*; the Log4j managed rules inspect bodies, the pipeds' gRPC-web bodies are binary protobuf, and nothing here runs Java.
  #checkov:skip=CKV_AWS_91:Access logs are an input (alb_access_logs_bucket, or create_alb_access_logs_bucket): every piped poll is a logged request, about 0.5 GB a month per piped before gzip.
  name                       = var.name
  load_balancer_type         = "application"
  internal                   = var.alb_internal
  subnets                    = var.alb_subnet_ids
  security_groups            = [aws_security_group.alb.id]
  idle_timeout               = var.alb_idle_timeout
  enable_deletion_protection = var.alb_deletion_protection
  drop_invalid_header_fields = true

  dynamic "access_logs" {
    for_each = local.access_logs_bucket == null ? [] : [1]
    content {
      bucket  = local.access_logs_bucket
      prefix  = var.name
      enabled = true
    }
  }

  # The load balancer checks that it may write to the bucket when logs are turned on.
  depends_on = [aws_s3_bucket_policy.alb_logs]

  tags = local.tags
}

resource "aws_lb_target_group" "function" {
  for_each    = local.alb_functions
  name        = "${var.name}-${each.key}"
  target_type = "lambda"
  # The functions read either header form; multi-value keeps repeated headers apart.
  lambda_multi_value_headers_enabled = true

  health_check {
    # Each check invokes the function; only the http function has /healthz to check.
    enabled             = var.alb_health_check && each.key == "http"
    path                = "/healthz"
    matcher             = "200"
    interval            = 35
    timeout             = 30
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }

  tags = local.tags
}

# The target is the live alias, not the function: a release or a rollback moves the alias,
# and the load balancer follows without a change of its own.
resource "aws_lambda_permission" "alb" {
  for_each      = local.alb_functions
  statement_id  = "AllowALBInvoke"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.this[each.key].function_name
  qualifier     = aws_lambda_alias.live[each.key].name
  principal     = "elasticloadbalancing.amazonaws.com"
  source_arn    = aws_lb_target_group.function[each.key].arn
}

resource "aws_lb_target_group_attachment" "function" {
  for_each         = local.alb_functions
  target_group_arn = aws_lb_target_group.function[each.key].arn
  target_id        = aws_lambda_alias.live[each.key].arn
  depends_on       = [aws_lambda_permission.alb]
}

resource "aws_lb_listener" "https" {
  load_balancer_arn = aws_lb.this.arn
  port              = 443
  protocol          = "HTTPS"
  ssl_policy        = var.ssl_policy
  certificate_arn   = local.certificate_arn

  # The http function, or with compute = "fargate" the tasks' HTTP target group (fargate.tf).
  default_action {
    type             = "forward"
    target_group_arn = local.fargate ? aws_lb_target_group.web[0].arn : aws_lb_target_group.function["http"].arn
  }

  tags = local.tags

  lifecycle {
    # No ACM certificate can cover the ALB's own name (<name>-<id>.<region>.elb.amazonaws.com),
    # so without a domain of one's own the bridge and browsers refuse the connection.
    precondition {
      condition     = var.domain_name != null
      error_message = "domain_name is required: set it to the host name the pipeds and the console will use (e.g. pipecd.example.com). No certificate covers the load balancer's own DNS name."
    }
    precondition {
      condition     = var.certificate_arn != null || var.route53_zone_id != null
      error_message = "The HTTPS listener needs a certificate: set certificate_arn to an ACM certificate covering domain_name, or route53_zone_id to the hosted zone of domain_name and the module requests one and validates it through DNS."
    }
  }
}

resource "aws_lb_listener_rule" "route" {
  for_each     = local.fargate ? {} : local.routes
  listener_arn = aws_lb_listener.https.arn
  priority     = local.route_priority[each.key]

  action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.function[each.key].arn
  }

  condition {
    path_pattern {
      values = each.value
    }
  }

  tags = local.tags
}

resource "aws_lb_listener" "http" {
  count             = var.http_redirect ? 1 : 0
  load_balancer_arn = aws_lb.this.arn
  port              = 80
  protocol          = "HTTP"

  default_action {
    type = "redirect"
    redirect {
      port        = "443"
      protocol    = "HTTPS"
      status_code = "HTTP_301"
    }
  }

  tags = local.tags
}

resource "aws_route53_record" "alias" {
  count   = local.create_route53_record ? 1 : 0
  zone_id = var.route53_zone_id
  name    = var.domain_name
  type    = "A"

  alias {
    name                   = aws_lb.this.dns_name
    zone_id                = aws_lb.this.zone_id
    evaluate_target_health = false
  }
}

# ---------------------------------------------------------------------------
# The certificate, when the module makes it: requested for domain_name and validated with
# the CNAME record ACM asks for, in route53_zone_id. The listener waits for the validation.

locals {
  # count and for_each need these known during the plan: a zone or certificate the root
  # module creates in the same apply is not, so create_route53_record and
  # create_certificate, when given, decide instead of the nullness of the IDs.
  create_route53_record = var.domain_name != null && (var.create_route53_record != null ? var.create_route53_record : var.route53_zone_id != null)
  create_certificate    = var.domain_name != null && (var.create_certificate != null ? var.create_certificate : var.certificate_arn == null && var.route53_zone_id != null)
  certificate_arn       = local.create_certificate ? aws_acm_certificate_validation.this[0].certificate_arn : var.certificate_arn
}

resource "aws_acm_certificate" "this" {
  count             = local.create_certificate ? 1 : 0
  domain_name       = var.domain_name
  validation_method = "DNS"
  tags              = local.tags

  # A renamed domain gets its certificate before the listener lets the old one go.
  lifecycle {
    create_before_destroy = true
  }
}

# Keyed by the domain (known at plan), not by domain_validation_options (known after the
# request).
resource "aws_route53_record" "certificate_validation" {
  for_each        = local.create_certificate ? toset([var.domain_name]) : toset([])
  zone_id         = var.route53_zone_id
  name            = one([for o in aws_acm_certificate.this[0].domain_validation_options : o.resource_record_name if o.domain_name == each.key])
  type            = one([for o in aws_acm_certificate.this[0].domain_validation_options : o.resource_record_type if o.domain_name == each.key])
  records         = [one([for o in aws_acm_certificate.this[0].domain_validation_options : o.resource_record_value if o.domain_name == each.key])]
  ttl             = 300
  allow_overwrite = true
}

resource "aws_acm_certificate_validation" "this" {
  count                   = local.create_certificate ? 1 : 0
  certificate_arn         = aws_acm_certificate.this[0].arn
  validation_record_fqdns = [for r in aws_route53_record.certificate_validation : r.fqdn]
}

