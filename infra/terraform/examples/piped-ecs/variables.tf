variable "name" {
  description = "Name of the task family, service, log group and roles."
  type        = string
  default     = "piped"
}

variable "cluster_arn" {
  description = "The ECS cluster the piped service runs in."
  type        = string
}

variable "subnet_ids" {
  description = "Subnets of the piped task (private, with a route to the internet or to the ALB and Git)."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the piped task (egress to the ALB on 443 and to Git)."
  type        = list(string)
}

variable "control_plane_url" {
  description = "Wisp's ALB, https://HOST (the bridge's --upstream)."
  type        = string
  validation {
    condition     = startswith(var.control_plane_url, "https://")
    error_message = "control_plane_url must be https:// (the piped's credentials cross the network)."
  }
}

variable "wisp_image" {
  description = "Wisp's image (scripts/image push), preferably by digest: REGISTRY/wisp@sha256:..."
  type        = string
}

variable "piped_image" {
  description = "Upstream's piped launcher image, e.g. ghcr.io/pipe-cd/launcher:v0.52.0."
  type        = string
}

variable "piped_config_secret_arn" {
  description = "Secrets Manager secret holding the piped config (apiAddress: localhost:9090), made outside Terraform so the piped key stays out of the state."
  type        = string
}

variable "architecture" {
  description = "CPU architecture of the task: ARM64 or X86_64 (the Wisp image has both)."
  type        = string
  default     = "ARM64"
  validation {
    condition     = contains(["ARM64", "X86_64"], var.architecture)
    error_message = "architecture must be ARM64 or X86_64."
  }
}

variable "log_retention_days" {
  description = "Days the task's logs are kept."
  type        = number
  default     = 365
}

variable "log_kms_key_arn" {
  description = "KMS key encrypting the log group (null: CloudWatch's own encryption)."
  type        = string
  default     = null
}
