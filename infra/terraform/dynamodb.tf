# The table exactly as `wisp aws init` creates it (shared/store-aws/src/dynamodb/table.rs,
# DYNAMODB.md): key pk/sk, the three sparse GSIs gsi0..gsi2 on gNpk/gNsk projecting ALL,
# on-demand billing, TTL on expires_at. Point-in-time recovery and SSE are added here.
resource "aws_dynamodb_table" "this" {
  name                        = local.table_name
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = var.table_deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = "sk"
    type = "S"
  }

  dynamic "attribute" {
    for_each = ["g0pk", "g0sk", "g1pk", "g1sk", "g2pk", "g2sk"]
    content {
      name = attribute.value
      type = "S"
    }
  }

  dynamic "global_secondary_index" {
    for_each = [0, 1, 2]
    content {
      name            = "gsi${global_secondary_index.value}"
      hash_key        = "g${global_secondary_index.value}pk"
      range_key       = "g${global_secondary_index.value}sk"
      projection_type = "ALL"
    }
  }

  ttl {
    attribute_name = "expires_at"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = var.kms_key_arn
  }

  tags = local.tags
}
