# The table exactly as `wisp aws init` creates it (shared/store-aws/src/dynamodb/table.rs,
# DYNAMODB.md): key pk/sk, the three sparse GSIs gsi0..gsi2 on gNpk/gNsk projecting ALL,
# on-demand billing, TTL on expires_at. Point-in-time recovery and SSE are added here.
# dynamodb_billing_mode = "PROVISIONED" bills capacity by the hour instead, kept by
# application autoscaling (below) between dynamodb_capacity's bounds: cheaper than
# on-demand for a large steady fleet (docs/COSTS.md "Lambda or Fargate").
resource "aws_dynamodb_table" "this" {
  name                        = local.table_name
  billing_mode                = var.dynamodb_billing_mode
  read_capacity               = local.dynamodb_provisioned ? var.dynamodb_capacity.min_read : null
  write_capacity              = local.dynamodb_provisioned ? var.dynamodb_capacity.min_write : null
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
      read_capacity   = local.dynamodb_provisioned ? var.dynamodb_capacity.min_read : null
      write_capacity  = local.dynamodb_provisioned ? var.dynamodb_capacity.min_write : null
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

  lifecycle {
    # Autoscaling owns the capacities; an apply must not set them back to the minimum
    # (the usual cure for a busy table would be a few minutes of throttling). Because of
    # this, an existing on-demand table is switched once by hand (docs/DEPLOY.md,
    # "DynamoDB capacity"): Terraform would send the capacities it ignores.
    ignore_changes = [read_capacity, write_capacity, global_secondary_index]
  }
}

locals {
  dynamodb_provisioned = var.dynamodb_billing_mode == "PROVISIONED"

  # What autoscaling keeps, with dynamodb_billing_mode = "PROVISIONED": reads and writes of
  # the table and of each index, each on its own.
  dynamodb_scaled = local.dynamodb_provisioned ? merge([
    for resource in concat(
      [{ key = "table", id = "table/${local.table_name}", kind = "table" }],
      [for i in [0, 1, 2] : { key = "gsi${i}", id = "table/${local.table_name}/index/gsi${i}", kind = "index" }],
      ) : {
      for units in ["read", "write"] : "${resource.key}-${units}" => {
        resource_id = resource.id
        dimension   = "dynamodb:${resource.kind}:${title(units)}CapacityUnits"
        metric      = "DynamoDB${title(units)}CapacityUtilization"
        min         = units == "read" ? var.dynamodb_capacity.min_read : var.dynamodb_capacity.min_write
        max         = units == "read" ? var.dynamodb_capacity.max_read : var.dynamodb_capacity.max_write
      }
    }
  ]...) : {}
}

# Application Auto Scaling acts through its service-linked role for DynamoDB, which AWS
# creates on the first registration (the deployer needs iam:CreateServiceLinkedRole once).
# No grant of the functions or tasks changes: capacity is not a data-plane operation.
resource "aws_appautoscaling_target" "dynamodb" {
  for_each           = local.dynamodb_scaled
  service_namespace  = "dynamodb"
  resource_id        = each.value.resource_id
  scalable_dimension = each.value.dimension
  min_capacity       = each.value.min
  max_capacity       = each.value.max

  depends_on = [aws_dynamodb_table.this]
}

resource "aws_appautoscaling_policy" "dynamodb" {
  for_each           = local.dynamodb_scaled
  name               = "${var.name}-dynamodb-${each.key}"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.dynamodb[each.key].service_namespace
  resource_id        = aws_appautoscaling_target.dynamodb[each.key].resource_id
  scalable_dimension = aws_appautoscaling_target.dynamodb[each.key].scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value = var.dynamodb_capacity.target
    predefined_metric_specification {
      predefined_metric_type = each.value.metric
    }
  }
}
