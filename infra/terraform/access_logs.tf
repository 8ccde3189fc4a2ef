# The load balancer's access logs: into the operator's bucket (alb_access_logs_bucket), or
# into one the module creates (create_alb_access_logs_bucket) with the policy that lets
# Elastic Load Balancing deliver them. The load balancer writes under
# <name>/AWSLogs/<account id>/, encrypted with S3-managed keys (the only encryption ALB
# log delivery supports).

locals {
  create_access_logs_bucket = var.create_alb_access_logs_bucket && var.alb_access_logs_bucket == null
  # Named, not read from the bucket, so that the policy is known when planning.
  access_logs_bucket_name = "${var.name}-alb-logs-${local.account_id}-${local.region}"
  access_logs_bucket_arn  = "arn:${local.partition}:s3:::${local.access_logs_bucket_name}"
  access_logs_bucket      = var.alb_access_logs_bucket != null ? var.alb_access_logs_bucket : (local.create_access_logs_bucket ? aws_s3_bucket.alb_logs[0].bucket : null)
}

# The regional Elastic Load Balancing account, which delivers the logs in the regions that
# existed before August 2022; later regions deliver as the service principal below.
data "aws_elb_service_account" "current" {
  count = local.create_access_logs_bucket ? 1 : 0
}

resource "aws_s3_bucket" "alb_logs" {
  #checkov:skip=CKV_AWS_18:This is the log bucket; logging its own accesses would need yet another bucket.
  #checkov:skip=CKV_AWS_21:Log objects are written once and expire; versions would only keep deleted logs.
  #checkov:skip=CKV_AWS_144:Cross-region replication of access logs doubles their storage; replicate if policy requires.
  #checkov:skip=CKV_AWS_145:ALB access log delivery supports only SSE-S3, not KMS keys.
  #checkov:skip=CKV2_AWS_62:Nothing consumes event notifications of this bucket.
  count         = local.create_access_logs_bucket ? 1 : 0
  bucket        = local.access_logs_bucket_name
  force_destroy = var.bucket_force_destroy
  tags          = local.tags
}

resource "aws_s3_bucket_public_access_block" "alb_logs" {
  count                   = local.create_access_logs_bucket ? 1 : 0
  bucket                  = aws_s3_bucket.alb_logs[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "alb_logs" {
  count  = local.create_access_logs_bucket ? 1 : 0
  bucket = aws_s3_bucket.alb_logs[0].id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "alb_logs" {
  count  = local.create_access_logs_bucket ? 1 : 0
  bucket = aws_s3_bucket.alb_logs[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "alb_logs" {
  count  = local.create_access_logs_bucket ? 1 : 0
  bucket = aws_s3_bucket.alb_logs[0].id

  rule {
    id     = "expire-access-logs"
    status = "Enabled"
    filter {}
    expiration {
      days = var.alb_access_logs_expiration_days
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

data "aws_iam_policy_document" "alb_logs" {
  count = local.create_access_logs_bucket ? 1 : 0

  statement {
    sid       = "ElbLogDelivery"
    actions   = ["s3:PutObject"]
    resources = ["${local.access_logs_bucket_arn}/${var.name}/AWSLogs/${local.account_id}/*"]
    principals {
      type        = "AWS"
      identifiers = [data.aws_elb_service_account.current[0].arn]
    }
  }

  statement {
    sid       = "ElbLogDeliveryService"
    actions   = ["s3:PutObject"]
    resources = ["${local.access_logs_bucket_arn}/${var.name}/AWSLogs/${local.account_id}/*"]
    principals {
      type        = "Service"
      identifiers = ["logdelivery.elasticloadbalancing.amazonaws.com"]
    }
  }

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [local.access_logs_bucket_arn, "${local.access_logs_bucket_arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "alb_logs" {
  count  = local.create_access_logs_bucket ? 1 : 0
  bucket = aws_s3_bucket.alb_logs[0].id
  policy = data.aws_iam_policy_document.alb_logs[0].json

  depends_on = [aws_s3_bucket_public_access_block.alb_logs]
}
