# One role per function, granting only what that function's code calls
# (shared/store-aws: DYNAMODB.md "IAM", s3.rs, secrets.rs; shared/lambda/src/boot.rs):
#
# | function  | DynamoDB                          | S3 objects                     | secrets          |
# |-----------|-----------------------------------|--------------------------------|------------------|
# | piped-api | DescribeTable GetItem PutItem Query | GetObject PutObject          | config           |
# | api       | DescribeTable GetItem PutItem Query | GetObject                    | config           |
# | web-api   | DescribeTable GetItem PutItem Query | GetObject                    | config, key      |
# | http      | DescribeTable GetItem             | GetObject under web_prefix     | config, key      |
# | jobs      | DescribeTable GetItem PutItem Query | GetObject PutObject DeleteObject | config         |
#
# Every function gets s3:ListBucket on the bucket: HeadBucket at init needs it, and
# without it a missing object reads as 403 instead of 404 (NotFound). DescribeTable is
# the init-time warm-up. No function deletes DynamoDB items (records expire by TTL) or
# scans (batch jobs Query the table partition). revocations.json (shared/store
# revocations.rs) is written by whatever revokes: api and web-api PutObject it (disabling a
# piped or an API key, deleting old keys), http GetObject and PutObject it (logout).
#
# Item reads and writes and DescribeTable name the table only (they never apply to an
# index); Query names the indexes, and the table itself only for the jobs, whose insights
# read a kind's partition (every other listing reads an index).
#
# With redis_auth = "iam" (redis.tf) the functions in redis_functions, and only they, get
# the cache's lookup at init (elasticache:DescribeReplicationGroups, or
# DescribeServerlessCaches, on the cache; DescribeUsers on the user: shared/store-redis
# elasticache.rs) and elasticache:Connect on the cache and the user (the signed token).
# The Fargate task role (fargate.tf) holds them through the serving roles' grants.
#
# tests/e2e/iam_enforced.rs runs every function with exactly these grants (derived from
# this file by scripts/iam-policies) on a moto_server enforcing IAM, and prints the grants
# no scenario used; it fails on any other. Those that stay: logs:* (Lambda writes the
# function's stdout with them, not the code); http's GetObject under web_prefix (the
# console's index.html, not uploaded in the tests); jobs' PutItem (a job changes a record
# only when there is one to fix, e.g. an orphaned command); elasticache:Connect (checked
# by ElastiCache when Redis sees the token, not an API call).

locals {
  dynamodb_read  = ["dynamodb:DescribeTable", "dynamodb:GetItem"]
  dynamodb_write = ["dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem"]

  s3_objects = "${aws_s3_bucket.this.arn}/${var.s3_key_prefix}*"

  access = {
    "piped-api" = {
      dynamodb   = local.dynamodb_write
      s3         = ["s3:GetObject", "s3:PutObject"]
      s3_objects = local.s3_objects
    }
    "api" = {
      dynamodb   = local.dynamodb_write
      s3         = ["s3:GetObject"]
      s3_objects = local.s3_objects
    }
    "web-api" = {
      dynamodb   = local.dynamodb_write
      s3         = ["s3:GetObject"]
      s3_objects = local.s3_objects
    }
    "http" = {
      # Console login reads the project (GetItem); static files come from web_prefix:
      # index.html read here, the rest by presigned URLs signed with this role.
      dynamodb   = local.dynamodb_read
      s3         = var.web_prefix == null ? [] : ["s3:GetObject"]
      s3_objects = "${aws_s3_bucket.this.arn}/${var.s3_key_prefix}${coalesce(var.web_prefix, "console/")}*"
    }
    "jobs" = {
      dynamodb   = local.dynamodb_write
      s3         = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
      s3_objects = local.s3_objects
    }
  }
}

locals {
  # dynamodb:Query (header): listings read an index; only the jobs read a partition of
  # the table itself (insights; shared/store-aws dynamodb.rs `scan`).
  indexes = "${aws_dynamodb_table.this.arn}/index/*"
  query = {
    "piped-api" = [local.indexes]
    "api"       = [local.indexes]
    "web-api"   = [local.indexes]
    "jobs"      = [aws_dynamodb_table.this.arn, local.indexes]
  }

  # revocations.json (header): the functions that revoke and lack it among their objects.
  revocations = "${aws_s3_bucket.this.arn}/${var.s3_key_prefix}revocations.json"
  revocations_access = {
    "api"     = ["s3:PutObject"]
    "web-api" = ["s3:PutObject"]
    "http"    = ["s3:GetObject", "s3:PutObject"]
  }
}

data "aws_iam_policy_document" "assume_lambda" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "function" {
  for_each             = local.functions
  name                 = "${var.name}-${each.key}"
  description          = "Wisp ${each.key} function"
  path                 = var.iam_role_path
  permissions_boundary = var.iam_permissions_boundary_arn
  assume_role_policy   = data.aws_iam_policy_document.assume_lambda.json
  tags                 = local.tags
}

# The grants per role, as statements: the functions' documents (below) and the Fargate task
# role's (fargate.tf, the union of the serving roles') are both made from these, so that a
# grant is written once.
locals {
  grants = {
    for role in keys(local.all_functions) : role => concat(
      [{ sid = "Table", actions = local.access[role].dynamodb, resources = [aws_dynamodb_table.this.arn] }],
      contains(keys(local.query), role) ? [{ sid = "Query", actions = ["dynamodb:Query"], resources = local.query[role] }] : [],
      [{ sid = "Bucket", actions = ["s3:ListBucket"], resources = [aws_s3_bucket.this.arn] }],
      length(local.access[role].s3) > 0 ? [{ sid = "Objects", actions = local.access[role].s3, resources = [local.access[role].s3_objects] }] : [],
      contains(keys(local.revocations_access), role) ? [{ sid = "Revocations", actions = local.revocations_access[role], resources = [local.revocations] }] : [],
      [{
        sid     = "Secrets"
        actions = ["secretsmanager:GetSecretValue"]
        resources = concat(
          [aws_secretsmanager_secret.config.arn],
          contains(local.needs_encryption_key, role) ? [aws_secretsmanager_secret.encryption_key.arn] : [],
        )
      }],
      # IAM auth to the cache (redis.tf), for the roles that use it (redis_functions) and no
      # other: the lookup at init names the cache and the user; Connect is what ElastiCache
      # checks of the signed token's signer, on both.
      var.enable_redis && local.redis_iam && contains(var.redis_functions, role) ? [
        { sid = "CacheLookup", actions = [local.redis_describe], resources = [local.redis_cache_arn] },
        { sid = "CacheUserLookup", actions = ["elasticache:DescribeUsers"], resources = [local.redis_user_arn] },
        { sid = "CacheConnect", actions = ["elasticache:Connect"], resources = [local.redis_cache_arn, local.redis_user_arn] },
      ] : [],
      var.kms_key_arn == null ? [] : [{ sid = "Kms", actions = ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"], resources = [var.kms_key_arn] }],
    )
  }
}

data "aws_iam_policy_document" "function" {
  for_each = local.functions

  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.function[each.key].arn}:*"]
  }

  dynamic "statement" {
    for_each = local.grants[each.key]
    content {
      sid       = statement.value.sid
      actions   = statement.value.actions
      resources = statement.value.resources
    }
  }
}

resource "aws_iam_role_policy" "function" {
  for_each = local.functions
  name     = "wisp-${each.key}"
  role     = aws_iam_role.function[each.key].id
  policy   = data.aws_iam_policy_document.function[each.key].json
}

# In the VPC (redis_functions with enable_redis) Lambda manages the function's network
# interfaces with the role's permissions. AWSLambdaENIManagementAccess holds only the
# network-interface calls; AWSLambdaVPCAccessExecutionRole would add logs:* on every log
# group, which the inline policy already grants for the function's own.
resource "aws_iam_role_policy_attachment" "vpc_access" {
  for_each   = local.vpc_functions
  role       = aws_iam_role.function[each.key].name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AWSLambdaENIManagementAccess"
}

# Active tracing (enable_xray) sends segments with the role's permissions. AWS's managed
# policy holds only the calls a tracer makes (segments, telemetry, sampling rules), none
# of which take a resource ARN.
resource "aws_iam_role_policy_attachment" "xray" {
  for_each   = var.enable_xray ? local.functions : {}
  role       = aws_iam_role.function[each.key].name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"
}
