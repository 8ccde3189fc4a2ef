variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "wisp"
}

variable "artifacts_dir" {
  description = "Where `cargo lambda build --output-format zip` put the functions: <repo>/target/lambda."
  type        = string
  default     = "../../../../target/lambda"
}

variable "vpc_id" {
  description = "VPC of the load balancer."
  type        = string
}

variable "public_subnet_ids" {
  description = "Public subnets (two or more availability zones) for the load balancer."
  type        = list(string)
}

variable "certificate_arn" {
  description = "ACM certificate covering domain_name; null with route53_zone_id: the module requests and validates one."
  type        = string
  default     = null
}

variable "domain_name" {
  description = "Host name of the control plane, e.g. pipecd.example.com."
  type        = string
}

variable "route53_zone_id" {
  description = "Hosted zone in which to create domain_name's alias record; null to manage DNS yourself."
  type        = string
  default     = null
}

variable "alarm_sns_topic_arn" {
  description = "SNS topic for the alarms' notifications; null leaves the alarms without actions."
  type        = string
  default     = null
}

variable "config_revision" {
  description = "Change it after putting a new config into the config secret (e.g. terraform apply -var config_revision=$(date +%F-%H%M)): the functions publish new versions and their live aliases move to them."
  type        = string
  default     = null
}
