output "alb_dns_name" {
  description = "DNS name of the load balancer (point domain_name's record at it)."
  value       = aws_lb.this.dns_name
}

output "alb_zone_id" {
  description = "Hosted zone of the load balancer, for alias records."
  value       = aws_lb.this.zone_id
}

output "alb_arn" {
  description = "ARN of the load balancer."
  value       = aws_lb.this.arn
}

output "address" {
  description = "The control plane's HTTPS address: `wisp bridge --upstream` and the config's spec.address."
  value       = "https://${local.host}"
}

output "console_url" {
  description = "The web console's login page (append ?project=<id>)."
  value       = "https://${local.host}/login"
}

output "table_name" {
  description = "The DynamoDB table (datastore.config.table)."
  value       = aws_dynamodb_table.this.name
}

output "table_arn" {
  description = "ARN of the DynamoDB table."
  value       = aws_dynamodb_table.this.arn
}

output "bucket_name" {
  description = "The S3 bucket (filestore.config.bucket)."
  value       = aws_s3_bucket.this.bucket
}

output "config_secret_arn" {
  description = "The secret to put the control-plane config in (WISP_CONFIG_SECRET)."
  value       = aws_secretsmanager_secret.config.arn
}

output "config_secret_name" {
  description = "Name of the config secret (for `wisp --config-secret`)."
  value       = aws_secretsmanager_secret.config.name
}

output "encryption_key_secret_arn" {
  description = "The secret to put the encryption key in (WISP_ENCRYPTION_KEY_SECRET)."
  value       = aws_secretsmanager_secret.encryption_key.arn
}

output "function_names" {
  description = "Lambda function name by function key (piped-api, api, web-api, http, jobs)."
  value       = { for k, f in aws_lambda_function.this : k => f.function_name }
}

output "role_arns" {
  description = "IAM role ARN by function key."
  value       = { for k, r in aws_iam_role.function : k => r.arn }
}

output "log_group_names" {
  description = "CloudWatch log group by function key."
  value       = { for k, g in aws_cloudwatch_log_group.function : k => g.name }
}

output "alarm_names" {
  description = "Names of the CloudWatch alarms (empty without create_alarms)."
  value       = [for a in local.alarms : a.alarm_name]
}

output "dashboard_name" {
  description = "Name of the CloudWatch dashboard, or null without create_dashboard."
  value       = var.create_dashboard ? aws_cloudwatch_dashboard.this[0].dashboard_name : null
}

output "redis_address" {
  description = "host:port of the cache's endpoint (the replication group's primary, or the serverless cache's), or null without enable_redis. With redis_auth = \"iam\" the config names the cache by redis_cache_id instead."
  value = var.enable_redis ? (
    local.redis_serverless ? "${aws_elasticache_serverless_cache.redis[0].endpoint[0].address}:6379" : "${aws_elasticache_replication_group.redis[0].primary_endpoint_address}:6379"
  ) : null
}

output "redis_cache_id" {
  description = "The cache's ElastiCache id (replication group id or serverless cache name: cache.config.cacheId), or null without enable_redis."
  value       = var.enable_redis ? local.redis_cache_id : null
}

output "redis_username" {
  description = "With redis_auth = \"iam\": the ElastiCache user with IAM auth the functions sign in as (cache.config.username); else null."
  value       = local.redis_iam ? local.redis_user_id : null
}

output "routes" {
  description = "ALB path patterns by function key (the http function is the default action)."
  value       = local.routes
}

output "config_template" {
  description = "The stores part of the control-plane config for this deployment (with redis_auth = \"iam\" the cache named by id; with a token, fill in cache.config.authToken), then put it in the config secret."
  value = templatefile("${path.module}/config.yaml.tftpl", {
    address          = "https://${local.host}"
    table            = aws_dynamodb_table.this.name
    bucket           = aws_s3_bucket.this.bucket
    prefix           = var.s3_key_prefix
    region           = local.region
    redis_address    = local.redis_node_based && !local.redis_iam ? "${aws_elasticache_replication_group.redis[0].primary_endpoint_address}:6379" : ""
    redis_cache_id   = local.redis_iam ? local.redis_cache_id : ""
    redis_serverless = local.redis_serverless
    redis_username   = local.redis_user_id
  })
}

output "alias_arns" {
  description = "ARN of each function's live alias (what the load balancer and the schedules invoke), by function key."
  value       = { for k, a in aws_lambda_alias.live : k => a.arn }
}

output "certificate_arn" {
  description = "The HTTPS listener's certificate: certificate_arn, or the one the module requested and validated."
  value       = local.certificate_arn
}

output "waf_web_acl_arn" {
  description = "The WAF web ACL associated with the load balancer, or null."
  value       = local.waf_web_acl_arn
}

output "alb_access_logs_bucket" {
  description = "The bucket the load balancer writes its access logs to (under <name>/), or null."
  value       = local.access_logs_bucket
}

output "ecs_service_name" {
  description = "With compute = \"fargate\": the ECS service running wisp serve (in the cluster <name>), else null."
  value       = local.fargate ? aws_ecs_service.serve[0].name : null
}

output "task_role_arn" {
  description = "With compute = \"fargate\": the tasks' IAM role (the serving functions' grants), else null."
  value       = local.fargate ? aws_iam_role.task[0].arn : null
}
