# The filestore: stage logs, live state, command outputs, shared objects, insights,
# the jobs' markers and the console's static files, under var.s3_key_prefix.
resource "aws_s3_bucket" "this" {
  #checkov:skip=CKV_AWS_18:Server access logs need a second bucket and log every piped poll's object reads; enable them on the operator's logging bucket if required.
  #checkov:skip=CKV_AWS_144:Cross-region replication doubles storage for data the control plane can lose (logs, caches of live state); back up what matters instead.
  #checkov:skip=CKV2_AWS_62:Nothing consumes event notifications of this bucket.
  bucket        = local.bucket_name
  force_destroy = var.bucket_force_destroy
  tags          = local.tags
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket                  = aws_s3_bucket.this.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    # Fewer KMS requests (and KMS charges) per object with a customer-managed key.
    bucket_key_enabled = var.kms_key_arn != null
  }
}

# Only with s3_versioning; removing it later suspends versioning.
resource "aws_s3_bucket_versioning" "this" {
  count  = var.s3_versioning ? 1 : 0
  bucket = aws_s3_bucket.this.id
  versioning_configuration {
    status = "Enabled"
  }
}

# Stage logs (log/<deployment>/<stage>/<retry>.txt) and command outputs such as
# plan-preview results (command-output/<command>.json) grow without bound otherwise;
# see shared/store/src/stagelog.rs and commandoutput.rs for the key layout.
resource "aws_s3_bucket_lifecycle_configuration" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  rule {
    id     = "expire-stage-logs"
    status = var.stage_log_expiration_days == null ? "Disabled" : "Enabled"
    filter {
      prefix = "${var.s3_key_prefix}log/"
    }
    expiration {
      days = coalesce(var.stage_log_expiration_days, 90)
    }
  }

  rule {
    id     = "expire-command-outputs"
    status = var.command_output_expiration_days == null ? "Disabled" : "Enabled"
    filter {
      prefix = "${var.s3_key_prefix}command-output/"
    }
    expiration {
      days = coalesce(var.command_output_expiration_days, 7)
    }
  }

  dynamic "rule" {
    for_each = var.s3_versioning ? [1] : []
    content {
      id     = "expire-noncurrent-versions"
      status = "Enabled"
      filter {
        prefix = var.s3_key_prefix
      }
      noncurrent_version_expiration {
        noncurrent_days = var.noncurrent_version_expiration_days
      }
    }
  }

  depends_on = [aws_s3_bucket_versioning.this]
}

# Refuse plain-HTTP requests (the SDK always uses HTTPS).
data "aws_iam_policy_document" "bucket" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.this.arn, "${aws_s3_bucket.this.arn}/*"]
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

resource "aws_s3_bucket_policy" "this" {
  bucket = aws_s3_bucket.this.id
  policy = data.aws_iam_policy_document.bucket.json

  depends_on = [aws_s3_bucket_public_access_block.this]
}
