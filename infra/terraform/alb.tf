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
  #checkov:skip=CKV2_AWS_28:A WAF web ACL is the operator's choice (and cost); every route authenticates its callers (piped keys, API keys, session cookies).
  name                       = var.name
  load_balancer_type         = "application"
  internal                   = var.alb_internal
  subnets                    = var.alb_subnet_ids
  security_groups            = [aws_security_group.alb.id]
  idle_timeout               = var.alb_idle_timeout
  enable_deletion_protection = var.alb_deletion_protection
  drop_invalid_header_fields = true

  dynamic "access_logs" {
    for_each = var.alb_access_logs_bucket == null ? [] : [1]
    content {
      bucket  = var.alb_access_logs_bucket
      prefix  = var.name
      enabled = true
    }
  }

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

resource "aws_lambda_permission" "alb" {
  for_each      = local.alb_functions
  statement_id  = "AllowALBInvoke"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.this[each.key].function_name
  principal     = "elasticloadbalancing.amazonaws.com"
  source_arn    = aws_lb_target_group.function[each.key].arn
}

resource "aws_lb_target_group_attachment" "function" {
  for_each         = local.alb_functions
  target_group_arn = aws_lb_target_group.function[each.key].arn
  target_id        = aws_lambda_function.this[each.key].arn
  depends_on       = [aws_lambda_permission.alb]
}

resource "aws_lb_listener" "https" {
  load_balancer_arn = aws_lb.this.arn
  port              = 443
  protocol          = "HTTPS"
  ssl_policy        = var.ssl_policy
  certificate_arn   = var.certificate_arn

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.function["http"].arn
  }

  tags = local.tags
}

resource "aws_lb_listener_rule" "route" {
  for_each     = local.routes
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
  count   = var.route53_zone_id != null && var.domain_name != null ? 1 : 0
  zone_id = var.route53_zone_id
  name    = var.domain_name
  type    = "A"

  alias {
    name                   = aws_lb.this.dns_name
    zone_id                = aws_lb.this.zone_id
    evaluate_target_health = false
  }
}
