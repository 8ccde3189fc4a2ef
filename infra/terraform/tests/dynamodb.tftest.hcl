# `terraform test` of dynamodb_billing_mode (dynamodb.tf), planned offline as
# module.tftest.hcl does (same provider settings and overrides): on-demand by default with
# no autoscaling; PROVISIONED with capacities on the table and each index and a target
# tracking policy for each, the function grants unchanged (capacity is not a data-plane
# operation).

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
}

override_data {
  target = data.aws_caller_identity.current
  values = { account_id = "123456789012" }
}

override_data {
  target = data.aws_partition.current
  values = { partition = "aws" }
}

override_data {
  target = data.aws_region.current
  values = { name = "us-east-1" }
}

# Known during the plan, so that the functions' environment is.
override_resource {
  target          = aws_secretsmanager_secret.config
  override_during = plan
  values          = { arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/config-AbCdEf" }
}

override_resource {
  target          = aws_secretsmanager_secret.encryption_key
  override_during = plan
  values          = { arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wisp/encryption-key-AbCdEf" }
}

# The alarms' and the dashboard's LoadBalancer dimension, so that the dashboard body is
# known during the plan.
override_resource {
  target          = aws_lb.this
  override_during = plan
  values = {
    arn        = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/wisp/0123456789abcdef"
    arn_suffix = "app/wisp/0123456789abcdef"
    dns_name   = "wisp-123456789.us-east-1.elb.amazonaws.com"
  }
}

# One ARN for every alias (an override cannot tell the instances apart): enough to tell an
# alias from a function, whose ARN stays unknown during the plan.
override_resource {
  target          = aws_lambda_alias.live
  override_during = plan
  values          = { arn = "arn:aws:lambda:us-east-1:123456789012:function:wisp-fn:live" }
}

# Computed from the region by the provider; overridden like the account.
override_data {
  target = data.aws_elb_service_account.current
  values = { arn = "arn:aws:iam::127311923021:root" }
}

override_resource {
  target          = aws_elasticache_replication_group.redis
  override_during = plan
  values          = { primary_endpoint_address = "master.wisp-cache.test.use1.cache.amazonaws.com" }
}


variables {
  artifacts_dir   = "./tests/artifacts"
  vpc_id          = "vpc-0123456789abcdef0"
  alb_subnet_ids  = ["subnet-a", "subnet-b"]
  certificate_arn = "arn:aws:acm:us-east-1:123456789012:certificate/test"
  domain_name     = "pipecd.example.com"
}

run "on_demand_by_default" {
  command = plan

  assert {
    condition     = aws_dynamodb_table.this.billing_mode == "PAY_PER_REQUEST" && length(aws_appautoscaling_target.dynamodb) == 0 && length(aws_appautoscaling_policy.dynamodb) == 0
    error_message = "the default table is on-demand, with no autoscaling"
  }
}

run "provisioned" {
  command = plan

  variables {
    dynamodb_billing_mode = "PROVISIONED"
    dynamodb_capacity     = { min_read = 5, max_read = 2000, min_write = 3, target = 65 }
  }

  assert {
    condition     = aws_dynamodb_table.this.billing_mode == "PROVISIONED" && aws_dynamodb_table.this.read_capacity == 5 && aws_dynamodb_table.this.write_capacity == 3
    error_message = "PROVISIONED: the table starts at the minimum capacities"
  }
  assert {
    condition     = length(aws_dynamodb_table.this.global_secondary_index) == 3 && alltrue([for g in aws_dynamodb_table.this.global_secondary_index : g.read_capacity == 5 && g.write_capacity == 3])
    error_message = "PROVISIONED: each of the three indexes starts at the minimum capacities"
  }
  assert {
    condition = {
      for k, t in aws_appautoscaling_target.dynamodb : k => [t.service_namespace, t.resource_id, t.scalable_dimension, t.min_capacity, t.max_capacity]
      } == {
      "table-read"  = ["dynamodb", "table/wisp", "dynamodb:table:ReadCapacityUnits", 5, 2000]
      "table-write" = ["dynamodb", "table/wisp", "dynamodb:table:WriteCapacityUnits", 3, 1000]
      "gsi0-read"   = ["dynamodb", "table/wisp/index/gsi0", "dynamodb:index:ReadCapacityUnits", 5, 2000]
      "gsi0-write"  = ["dynamodb", "table/wisp/index/gsi0", "dynamodb:index:WriteCapacityUnits", 3, 1000]
      "gsi1-read"   = ["dynamodb", "table/wisp/index/gsi1", "dynamodb:index:ReadCapacityUnits", 5, 2000]
      "gsi1-write"  = ["dynamodb", "table/wisp/index/gsi1", "dynamodb:index:WriteCapacityUnits", 3, 1000]
      "gsi2-read"   = ["dynamodb", "table/wisp/index/gsi2", "dynamodb:index:ReadCapacityUnits", 5, 2000]
      "gsi2-write"  = ["dynamodb", "table/wisp/index/gsi2", "dynamodb:index:WriteCapacityUnits", 3, 1000]
    }
    error_message = "PROVISIONED: autoscaling on reads and writes of the table and of each index, within dynamodb_capacity"
  }
  assert {
    condition = alltrue([
      for k, p in aws_appautoscaling_policy.dynamodb : p.policy_type == "TargetTrackingScaling" &&
      p.target_tracking_scaling_policy_configuration[0].target_value == 65 &&
      p.target_tracking_scaling_policy_configuration[0].predefined_metric_specification[0].predefined_metric_type == (endswith(k, "-read") ? "DynamoDBReadCapacityUtilization" : "DynamoDBWriteCapacityUtilization")
    ]) && length(aws_appautoscaling_policy.dynamodb) == 8
    error_message = "PROVISIONED: a target tracking policy per scaled dimension, at dynamodb_capacity.target"
  }
  # Capacity is not a data-plane operation: no function gains a grant.
  assert {
    condition     = !anytrue([for d in data.aws_iam_policy_document.function : anytrue([for st in d.statement : anytrue([for a in st.actions : startswith(a, "application-autoscaling:") || contains(["dynamodb:UpdateTable", "dynamodb:DescribeScalableTargets"], a)])])])
    error_message = "PROVISIONED: the functions' grants are those of on-demand"
  }
}

run "capacity_bounds_are_checked" {
  command = plan

  variables {
    dynamodb_billing_mode = "PROVISIONED"
    dynamodb_capacity     = { min_read = 10, max_read = 5 }
  }

  expect_failures = [var.dynamodb_capacity]
}

run "billing_mode_is_checked" {
  command = plan

  variables {
    dynamodb_billing_mode = "ON_DEMAND"
  }

  expect_failures = [var.dynamodb_billing_mode]
}
