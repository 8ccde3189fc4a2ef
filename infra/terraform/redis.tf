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

#
# Two kinds of cache (redis_mode): a node-based replication group (redis_node_type nodes,
# billed by the hour), or ElastiCache Serverless for Valkey (billed by use, 100 MB of
# storage at least). Two ways in (redis_auth): an AUTH token (node-based only; the config
# names the cache by address and carries the token), or an ElastiCache user with IAM
# auth: the config names the cache by id, the functions read its endpoint through the
# ElastiCache API at init (DescribeReplicationGroups or DescribeServerlessCaches, and
# DescribeUsers) and sign short-lived tokens as their roles (elasticache:Connect): no
# secret anywhere. The API is reached inside the VPC through an interface endpoint.

locals {
  redis_count     = var.enable_redis ? 1 : 0
  endpoints_count = var.enable_redis && var.create_vpc_endpoints ? 1 : 0
  nat_count       = var.enable_redis && var.create_nat_gateway ? 1 : 0

  redis_serverless = var.enable_redis && var.redis_mode == "serverless"
  redis_node_based = var.enable_redis && var.redis_mode == "node-based"
  # "none" without a cache; null picks from whether a token was given (which is no
  # secret, unlike the token).
  redis_auth = var.enable_redis ? coalesce(var.redis_auth, nonsensitive(var.redis_auth_token == null) ? "iam" : "token") : "none"
  redis_iam  = local.redis_auth == "iam"

  # Names known during the plan, so are the grants (iam.tf) and the config (outputs.tf).
  redis_cache_id = "${var.name}-cache"
  redis_user_id  = "${var.name}-app"
  redis_engine   = local.redis_serverless ? "valkey" : "redis"
  redis_arn      = "arn:${local.partition}:elasticache:${local.region}:${local.account_id}"
  redis_cache_arn = local.redis_serverless ? (
    "${local.redis_arn}:serverlesscache:${local.redis_cache_id}"
  ) : "${local.redis_arn}:replicationgroup:${local.redis_cache_id}"
  redis_user_arn = "${local.redis_arn}:user:${local.redis_user_id}"
  # The lookup at init: exactly the calls shared/store-redis/src/elasticache.rs makes.
  redis_describe = local.redis_serverless ? "elasticache:DescribeServerlessCaches" : "elasticache:DescribeReplicationGroups"
  # Only what shared/store-redis calls (PING, GET, SET, DEL and the hash commands).
  redis_access_string = "on ~* -@all +ping +get +set +del +hset +hget +hgetall +hdel"
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

# IAM auth: the user the functions sign in as (its user name equals its id, as IAM auth
# requires), in a user group with a disabled "default" user (a user group must have one;
# ElastiCache's own "default" user takes no password).
resource "aws_elasticache_user" "app" {
  count         = local.redis_iam ? 1 : 0
  user_id       = local.redis_user_id
  user_name     = local.redis_user_id
  engine        = local.redis_engine
  access_string = local.redis_access_string
  authentication_mode {
    type = "iam"
  }
  tags = local.tags
}

resource "aws_elasticache_user" "disabled_default" {
  count         = local.redis_iam ? 1 : 0
  user_id       = "${var.name}-default"
  user_name     = "default"
  engine        = local.redis_engine
  access_string = "off -@all"
  authentication_mode {
    type = "no-password-required"
  }
  tags = local.tags
}

resource "aws_elasticache_user_group" "redis" {
  count         = local.redis_iam ? 1 : 0
  user_group_id = "${var.name}-users"
  engine        = local.redis_engine
  user_ids      = [aws_elasticache_user.disabled_default[0].user_id, aws_elasticache_user.app[0].user_id]
  tags          = local.tags
}

resource "aws_elasticache_serverless_cache" "redis" {
  count                = local.redis_serverless ? 1 : 0
  name                 = local.redis_cache_id
  description          = "Wisp cache (an optimisation only: every value has a copy in DynamoDB or S3)"
  engine               = "valkey"
  major_engine_version = "8"
  kms_key_id           = var.kms_key_arn
  subnet_ids           = var.private_subnet_ids
  security_group_ids   = [aws_security_group.redis[0].id]
  user_group_id        = local.redis_iam ? aws_elasticache_user_group.redis[0].user_group_id : null
  # A cache: nothing to restore from snapshots.
  snapshot_retention_limit = 0

  cache_usage_limits {
    data_storage {
      maximum = var.redis_serverless_max_storage_gb
      unit    = "GB"
    }
  }

  tags = local.tags

  lifecycle {
    precondition {
      condition     = local.redis_iam && length(var.private_subnet_ids) > 0
      error_message = "redis_mode = \"serverless\" takes IAM auth only (leave redis_auth null or \"iam\", without redis_auth_token) and needs private_subnet_ids."
    }
    precondition {
      condition     = !(var.create_vpc_endpoints || var.create_nat_gateway) || length(var.private_route_table_ids) > 0
      error_message = "enable_redis with create_vpc_endpoints or create_nat_gateway needs private_route_table_ids (for the gateway endpoints' and the NAT gateway's routes)."
    }
  }
}

resource "aws_elasticache_replication_group" "redis" {
  #checkov:skip=CKV2_AWS_50:A single cache node by default: the cache is an optimisation and Wisp stays correct while it is down; redis_num_cache_clusters >= 2 turns on Multi-AZ failover.
  count                = local.redis_node_based ? 1 : 0
  replication_group_id = local.redis_cache_id
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
  # Token mode: the AUTH token; IAM mode: the user group (IAM auth needs Redis 7 or later).
  auth_token     = local.redis_iam ? null : var.redis_auth_token
  user_group_ids = local.redis_iam ? [aws_elasticache_user_group.redis[0].user_group_id] : null

  # A cache: nothing to restore from snapshots.
  snapshot_retention_limit = 0

  tags = local.tags

  lifecycle {
    precondition {
      condition     = (local.redis_iam || var.redis_auth_token != null) && length(var.private_subnet_ids) > 0
      error_message = "enable_redis needs private_subnet_ids, and redis_auth_token with redis_auth = \"token\"."
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

# IAM auth: the functions read the cache through the ElastiCache API at init.
resource "aws_vpc_endpoint" "elasticache" {
  count               = local.endpoints_count == 1 && local.redis_iam ? 1 : 0
  vpc_id              = var.vpc_id
  service_name        = "com.amazonaws.${local.region}.elasticache"
  vpc_endpoint_type   = "Interface"
  subnet_ids          = var.private_subnet_ids
  security_group_ids  = [aws_security_group.endpoints[0].id]
  private_dns_enabled = true
  tags                = merge(local.tags, { "Name" = "${var.name}-elasticache" })
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

