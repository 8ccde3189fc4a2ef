output "address" {
  description = "`wisp bridge --upstream` address."
  value       = module.wisp.address
}

output "console_url" {
  description = "The console's login page."
  value       = module.wisp.console_url
}

output "alb_dns_name" {
  description = "Point domain_name here if route53_zone_id is not set."
  value       = module.wisp.alb_dns_name
}

output "config_secret_name" {
  description = "Put the control-plane config here."
  value       = module.wisp.config_secret_name
}

output "config_template" {
  description = "The stores part of the config for this deployment."
  value       = module.wisp.config_template
}

output "function_names" {
  description = "The Lambda functions."
  value       = module.wisp.function_names
}

output "alarm_names" {
  description = "The CloudWatch alarms."
  value       = module.wisp.alarm_names
}

output "dashboard_name" {
  description = "The CloudWatch dashboard."
  value       = module.wisp.dashboard_name
}
