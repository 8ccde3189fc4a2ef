# Optional ElastiCache Redis for the cache (enable_redis). Redis lives in private subnets,
# so the functions that use it (redis_functions) run in the VPC too. By default there is
# no NAT gateway (it would cost more than the rest of an idle deployment, see
# docs/COSTS.md), so everything those functions call must be reachable inside the VPC:
#   * DynamoDB and S3 through gateway endpoints (free, routes in the private route tables);
#   * Secrets Manager through an interface endpoint: Secrets Manager has no gateway
#     endpoint, and the functions read the config and the key from it during init.
# The http function calls GitHub or the OIDC provider for SSO, which no endpoint serves,
# so by default it stays out of the VPC with the in-process cache (what that changes:
# infra/terraform/README.md "Redis and the VPC"); in the VPC it needs create_nat_gateway.
# The cache is only an optimisation: nothing is lost when Redis is down.

locals {
  redis_count     = var.enable_redis ? 1 : 0
  endpoints_count = var.enable_redis && var.create_vpc_endpoints ? 1 : 0
  nat_count       = var.enable_redis && var.create_nat_gateway ? 1 : 0
}

resource "aws_security_group" "lambda" {
  count       = local.redis_count
  name        = "${var.name}-functions"
  description = "Wisp functions in the VPC"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

resource "aws_security_group" "redis" {
  count       = local.redis_count
  name        = "${var.name}-redis"
  description = "Wisp Redis cache"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "redis_from_lambda" {
  count                        = local.redis_count
  security_group_id            = aws_security_group.redis[0].id
  description                  = "Redis from the Wisp functions"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = aws_security_group.lambda[0].id
}

resource "aws_vpc_security_group_egress_rule" "lambda_to_redis" {
  count                        = local.redis_count
  security_group_id            = aws_security_group.lambda[0].id
  description                  = "Redis"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = aws_security_group.redis[0].id
}

# With the module's endpoints, HTTPS goes only to them; otherwise to whatever the VPC
# routes to (the operator's endpoints or NAT).
resource "aws_vpc_security_group_egress_rule" "lambda_to_gateway_endpoints" {
  for_each          = var.enable_redis && var.create_vpc_endpoints ? toset(["dynamodb", "s3"]) : toset([])
  security_group_id = aws_security_group.lambda[0].id
  description       = "HTTPS to the ${each.value} gateway endpoint"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  prefix_list_id    = each.value == "s3" ? aws_vpc_endpoint.s3[0].prefix_list_id : aws_vpc_endpoint.dynamodb[0].prefix_list_id
}

resource "aws_vpc_security_group_egress_rule" "lambda_to_secrets_endpoint" {
  count                        = local.endpoints_count
  security_group_id            = aws_security_group.lambda[0].id
  description                  = "HTTPS to the Secrets Manager endpoint"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = aws_security_group.endpoints[0].id
}

resource "aws_vpc_security_group_egress_rule" "lambda_https" {
  count             = var.enable_redis && (!var.create_vpc_endpoints || var.create_nat_gateway) ? 1 : 0
  security_group_id = aws_security_group.lambda[0].id
  description       = "HTTPS through the VPC's routes: NAT, or the VPC's own endpoints"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_elasticache_subnet_group" "redis" {
  count       = local.redis_count
  name        = "${var.name}-redis"
  description = "Wisp Redis cache"
  subnet_ids  = var.private_subnet_ids
  tags        = local.tags
}

resource "aws_elasticache_replication_group" "redis" {
  #checkov:skip=CKV2_AWS_50:A single cache node by default: the cache is an optimisation and Wisp stays correct while it is down; redis_num_cache_clusters >= 2 turns on Multi-AZ failover.
  count                = local.redis_count
  replication_group_id = "${var.name}-cache"
  description          = "Wisp cache (an optimisation only: every value has a copy in DynamoDB or S3)"
  engine               = "redis"
  engine_version       = var.redis_engine_version
  node_type            = var.redis_node_type
  num_cache_clusters   = var.redis_num_cache_clusters
  port                 = 6379

  automatic_failover_enabled = var.redis_num_cache_clusters > 1
  multi_az_enabled           = var.redis_num_cache_clusters > 1

  subnet_group_name  = aws_elasticache_subnet_group.redis[0].name
  security_group_ids = [aws_security_group.redis[0].id]

  at_rest_encryption_enabled = true
  kms_key_id                 = var.kms_key_arn
  transit_encryption_enabled = true
  auth_token                 = var.redis_auth_token

  # A cache: nothing to restore from snapshots.
  snapshot_retention_limit = 0

  tags = local.tags

  lifecycle {
    precondition {
      condition     = var.redis_auth_token != null && length(var.private_subnet_ids) > 0
      error_message = "enable_redis needs redis_auth_token and private_subnet_ids."
    }
    precondition {
      condition     = !(var.create_vpc_endpoints || var.create_nat_gateway) || length(var.private_route_table_ids) > 0
      error_message = "enable_redis with create_vpc_endpoints or create_nat_gateway needs private_route_table_ids (for the gateway endpoints' and the NAT gateway's routes)."
    }
  }
}

resource "aws_vpc_endpoint" "dynamodb" {
  count             = local.endpoints_count
  vpc_id            = var.vpc_id
  service_name      = "com.amazonaws.${local.region}.dynamodb"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = var.private_route_table_ids
  tags              = merge(local.tags, { "Name" = "${var.name}-dynamodb" })
}

resource "aws_vpc_endpoint" "s3" {
  count             = local.endpoints_count
  vpc_id            = var.vpc_id
  service_name      = "com.amazonaws.${local.region}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = var.private_route_table_ids
  tags              = merge(local.tags, { "Name" = "${var.name}-s3" })
}

resource "aws_security_group" "endpoints" {
  count       = local.endpoints_count
  name        = "${var.name}-endpoints"
  description = "Wisp interface endpoints"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "endpoints_from_lambda" {
  count                        = local.endpoints_count
  security_group_id            = aws_security_group.endpoints[0].id
  description                  = "HTTPS from the Wisp functions"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = aws_security_group.lambda[0].id
}

resource "aws_vpc_endpoint" "secretsmanager" {
  count               = local.endpoints_count
  vpc_id              = var.vpc_id
  service_name        = "com.amazonaws.${local.region}.secretsmanager"
  vpc_endpoint_type   = "Interface"
  subnet_ids          = var.private_subnet_ids
  security_group_ids  = [aws_security_group.endpoints[0].id]
  private_dns_enabled = true
  tags                = merge(local.tags, { "Name" = "${var.name}-secretsmanager" })
}

# Optional egress to the internet for the functions in the VPC (create_nat_gateway): one
# NAT gateway in a public subnet and a default route to it in each private route table.
# One gateway, not one per availability zone: a zone outage cuts SSO logins from the
# other zones until it is back, which costs less than a second gateway (docs/COSTS.md).
resource "aws_eip" "nat" {
  #checkov:skip=CKV2_AWS_19:The address belongs to the NAT gateway, not to an instance.
  count  = local.nat_count
  domain = "vpc"
  tags   = merge(local.tags, { "Name" = "${var.name}-nat" })
}

resource "aws_nat_gateway" "this" {
  count         = local.nat_count
  allocation_id = aws_eip.nat[0].id
  subnet_id     = coalesce(var.nat_gateway_subnet_id, var.alb_subnet_ids[0])
  tags          = merge(local.tags, { "Name" = "${var.name}-nat" })
}

# Fails if a route table already has a default route: then leave create_nat_gateway off
# and use that route (with create_vpc_endpoints = false for http in the VPC).
# Counted, not keyed by the IDs: route tables the root module creates in the same apply
# have no IDs during the plan, while their number is known.
resource "aws_route" "nat" {
  count                  = local.nat_count == 1 ? length(var.private_route_table_ids) : 0
  route_table_id         = var.private_route_table_ids[count.index]
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.this[0].id
}

