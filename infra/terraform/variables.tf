# Inputs of the Wisp module. README.md beside this file documents each one.

# ---------------------------------------------------------------------------
# Naming and artifacts

variable "name" {
  description = "Prefix of every resource name (functions, roles, ALB, table, secrets)."
  type        = string
  default     = "wisp"

  validation {
    # The ALB and target group names allow 32 characters; "-piped-api" is appended.
    condition     = can(regex("^[a-z][a-z0-9-]{0,21}$", var.name))
    error_message = "name: lowercase letters, digits and '-', starting with a letter, at most 22 characters."
  }
}

variable "artifacts_dir" {
  description = "Directory holding <binary>/bootstrap.zip for each function, as `cargo lambda build --arm64 --output-format zip` writes them (target/lambda)."
  type        = string
}

variable "tags" {
  description = "Tags added to every resource that takes tags."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------------------
# Network and load balancer

variable "vpc_id" {
  description = "VPC of the load balancer (and of the functions and Redis when enable_redis)."
  type        = string
}

variable "alb_subnet_ids" {
  description = "Subnets of the load balancer, in at least two availability zones (public subnets for an internet-facing ALB)."
  type        = list(string)

  validation {
    condition     = length(var.alb_subnet_ids) >= 2
    error_message = "alb_subnet_ids: an ALB needs subnets in at least two availability zones."
  }
}

variable "domain_name" {
  description = "Host name the console and the pipeds use (e.g. pipecd.example.com). Required: no certificate covers the ALB's own <name>.elb.amazonaws.com name, so the bridge and browsers would refuse it."
  type        = string
  default     = null
}

variable "certificate_arn" {
  description = "ACM certificate of the HTTPS listener, covering domain_name; null with route53_zone_id: the module requests one for domain_name and validates it through DNS records in that zone."
  type        = string
  default     = null
}

variable "route53_zone_id" {
  description = "Hosted zone of domain_name: the module creates domain_name's alias A record pointing at the ALB there and, without certificate_arn, the certificate's DNS validation record. null: manage DNS yourself."
  type        = string
  default     = null
}

variable "create_route53_record" {
  description = "Create domain_name's alias A record in route53_zone_id. null: when route53_zone_id is set. Give true or false when route53_zone_id is unknown until apply (a hosted zone the root module creates in the same apply), since count needs it during the plan."
  type        = bool
  default     = null
}

variable "create_certificate" {
  description = "Request the certificate for domain_name and validate it through DNS records in route53_zone_id. null: when certificate_arn is null and route53_zone_id is set. Give true or false when certificate_arn or route53_zone_id is unknown until apply (created in the same apply)."
  type        = bool
  default     = null
}

variable "alb_internal" {
  description = "Make the load balancer internal (reachable only inside the VPC and connected networks)."
  type        = bool
  default     = false
}

variable "alb_ingress_cidrs" {
  description = "IPv4 CIDR blocks allowed to reach the load balancer (pipeds' egress addresses, office networks)."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "http_redirect" {
  description = "Add an HTTP (port 80) listener that redirects to HTTPS."
  type        = bool
  default     = true
}

variable "ssl_policy" {
  description = "Security policy of the HTTPS listener."
  type        = string
  default     = "ELBSecurityPolicy-TLS13-1-2-2021-06"
}

variable "alb_deletion_protection" {
  description = "Deletion protection of the load balancer."
  type        = bool
  default     = true
}

variable "alb_idle_timeout" {
  description = "Idle timeout of the load balancer, in seconds."
  type        = number
  default     = 60
}

variable "alb_access_logs_bucket" {
  description = "Existing S3 bucket for the load balancer's access logs (its policy must let the ELB service write under <name>/AWSLogs/<account>/); null: none, unless create_alb_access_logs_bucket."
  type        = string
  default     = null
}

variable "create_alb_access_logs_bucket" {
  description = "Create a bucket for the load balancer's access logs (<name>-alb-logs-<account id>-<region>, SSE-S3, the ELB delivery policy, logs expiring after alb_access_logs_expiration_days) and turn the logs on. Ignored when alb_access_logs_bucket is set."
  type        = bool
  default     = false
}

variable "alb_access_logs_expiration_days" {
  description = "With create_alb_access_logs_bucket: days after which access logs expire."
  type        = number
  default     = 90
}

variable "waf_web_acl_arn" {
  description = "ARN of an existing regional WAF web ACL to associate with the load balancer. Must be known at plan time (a literal or a data source); null: none, unless create_waf_web_acl."
  type        = string
  default     = null
}

variable "create_waf_web_acl" {
  description = "Create a regional WAF web ACL for the load balancer that blocks a client address sending more than waf_auth_rate_limit requests to /auth/* within 5 minutes (console logins, SSO callbacks) and allows everything else. Ignored when waf_web_acl_arn is set."
  type        = bool
  default     = false
}

variable "waf_auth_rate_limit" {
  description = "With create_waf_web_acl: requests to /auth/* per client address per 5 minutes before that address is blocked (AWS WAF's minimum is 10)."
  type        = number
  default     = 100

  validation {
    condition     = var.waf_auth_rate_limit >= 10 && var.waf_auth_rate_limit <= 2000000000
    error_message = "waf_auth_rate_limit: from 10 to 2,000,000,000 (AWS WAF's bounds)."
  }
}

variable "alb_health_check" {
  description = "Health-check the http function from the ALB (GET /healthz). Each check is an invocation (about 74,000 a month at the 35 s interval), so it is off by default."
  type        = bool
  default     = false
}

# ---------------------------------------------------------------------------
# Functions

variable "architecture" {
  description = "Instruction set of the functions: arm64 (Graviton, cargo lambda --arm64) or x86_64."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture: arm64 or x86_64."
  }
}

variable "memory_size" {
  description = "Memory of each function in MB, by function key (piped-api, api, web-api, http, jobs); missing keys get 128."
  type        = map(number)
  default     = {}
}

variable "timeout" {
  description = "Timeout of each function in seconds, by function key; missing keys get 30 (jobs: 300)."
  type        = map(number)
  default     = {}
}

variable "reserved_concurrency" {
  description = "Reserved concurrency by function key (a ceiling on cost and on load on the stores); missing keys are unreserved."
  type        = map(number)
  default     = {}
}

variable "log_level" {
  description = "WISP_LOG of every function (a tracing filter: error, warn, info, debug)."
  type        = string
  default     = "info"
}

variable "config_revision" {
  description = "Any label of the config secret's current value (e.g. a date). Changing it publishes a new version of every function and moves the live aliases, so that a changed config reaches traffic (docs/DEPLOY.md, \"After changing the config\"); null: none."
  type        = string
  default     = null

  validation {
    condition     = var.config_revision == null || can(regex("^[A-Za-z0-9._:-]{1,40}$", var.config_revision))
    error_message = "config_revision: 1 to 40 letters, digits, '.', '_', ':' or '-'."
  }
}

variable "log_retention_days" {
  description = "Retention of the functions' CloudWatch log groups, in days."
  type        = number
  default     = 30
}

variable "web_prefix" {
  description = "WISP_WEB_PREFIX of the http function: the filestore prefix holding the console's built files (`wisp console upload --version VERSION` puts them there). null serves only /healthz and /auth/*."
  type        = string
  default     = "console/"

  validation {
    condition     = var.web_prefix == null || can(regex("^([A-Za-z0-9._-]+/)+$", var.web_prefix))
    error_message = "web_prefix: relative path segments ending with '/', e.g. console/."
  }
}

variable "otlp_endpoint" {
  description = "WISP_OTLP_ENDPOINT of the piped-api function: the OTLP/gRPC collector (http:// or https://, usually port 4317) the pipeds' own spans are relayed to, stamped with their project and piped; null drops them (answered OK). The functions must reach it (a VPC without NAT reaches only its endpoints)."
  type        = string
  default     = null
  validation {
    condition     = var.otlp_endpoint == null || can(regex("^https?://[^ ]+$", var.otlp_endpoint))
    error_message = "otlp_endpoint must be an http:// or https:// URL."
  }
}

variable "sso_allow_private_addresses" {
  description = "WISP_SSO_ALLOW_PRIVATE_ADDRESSES of the web-api and http functions: true lets projects' SSO settings (OIDC issuer and endpoints, GitHub Enterprise, proxy) name private, loopback and link-local addresses, as wisp serve --sso-allow-private-addresses; false allows public https addresses only."
  type        = bool
  default     = false
  nullable    = false
}

variable "kms_key_arn" {
  description = "Customer-managed KMS key for the table, bucket, secrets, log groups, Redis and the functions' environment; null uses AWS-managed keys. Its key policy must allow CloudWatch Logs (logs.<region>.amazonaws.com) when set."
  type        = string
  default     = null
}

variable "metrics_detail" {
  description = "The functions' own CloudWatch metrics (docs/METRICS.md): basic (what the alarms and the dashboard read, about 10 custom metrics) or detailed (every metric with few labels, about 75). Custom metrics are billed per metric-month (docs/COSTS.md)."
  type        = string
  default     = "basic"
  validation {
    condition     = contains(["basic", "detailed"], var.metrics_detail)
    error_message = "metrics_detail is basic or detailed."
  }
}

variable "iam_role_path" {
  description = "Path of every IAM role the module creates (e.g. /wisp/), for organisations whose policies require one."
  type        = string
  default     = "/"

  validation {
    condition     = can(regex("^/([A-Za-z0-9+=,.@_-]+/)*$", var.iam_role_path))
    error_message = "iam_role_path: '/' or '/segments/' (IAM path characters)."
  }
}

variable "iam_permissions_boundary_arn" {
  description = "Permissions boundary (a managed policy ARN) set on every IAM role the module creates; null: none. Organisations whose SCPs require a boundary on new roles set it."
  type        = string
  default     = null
}

variable "enable_xray" {
  description = "Active X-Ray tracing on every function (Lambda records a segment per sampled invocation, with its init and duration) and the roles' permission to send traces. Traces are billed per trace recorded (docs/COSTS.md)."
  type        = bool
  default     = false
}

# ---------------------------------------------------------------------------
# Scheduled jobs

variable "job_schedules" {
  description = "EventBridge schedule expression per job of the jobs function; set one to null to turn that job off."
  type        = map(string)
  default = {
    "orphan-commands"      = "rate(6 hours)"
    "piped-stats"          = "rate(1 day)"
    "plan-preview-outputs" = "cron(0 9 * * ? *)"
    "deployment-chains"    = "rate(1 minute)"
    "insights"             = "rate(1 hour)"
  }
}

# ---------------------------------------------------------------------------
# State: DynamoDB, S3, secrets

variable "table_name" {
  description = "DynamoDB table name (the datastore's `table`); null uses var.name."
  type        = string
  default     = null
}

variable "dynamodb_billing_mode" {
  description = "How the table is billed: \"PAY_PER_REQUEST\" (on-demand, the default: nothing to size, cheapest for small or bursty fleets) or \"PROVISIONED\" (capacity by the hour, kept by application autoscaling within dynamodb_capacity: cheaper for a large steady fleet; docs/COSTS.md). An existing on-demand table is switched once by hand first (docs/DEPLOY.md, \"DynamoDB capacity\")."
  type        = string
  default     = "PAY_PER_REQUEST"
  nullable    = false

  validation {
    condition     = contains(["PAY_PER_REQUEST", "PROVISIONED"], var.dynamodb_billing_mode)
    error_message = "dynamodb_billing_mode: \"PAY_PER_REQUEST\" or \"PROVISIONED\"."
  }
}

variable "dynamodb_capacity" {
  description = "With dynamodb_billing_mode = \"PROVISIONED\": the bounds application autoscaling keeps the table and each of its three indexes within, read and write capacity units apart (min_read, max_read, min_write, max_write), and the utilisation it aims at (target, percent of the provisioned units consumed)."
  type = object({
    min_read  = optional(number, 1)
    max_read  = optional(number, 4000)
    min_write = optional(number, 1)
    max_write = optional(number, 1000)
    target    = optional(number, 70)
  })
  default  = {}
  nullable = false

  validation {
    condition = (
      var.dynamodb_capacity.min_read >= 1 && var.dynamodb_capacity.max_read >= var.dynamodb_capacity.min_read &&
      var.dynamodb_capacity.min_write >= 1 && var.dynamodb_capacity.max_write >= var.dynamodb_capacity.min_write
    )
    error_message = "dynamodb_capacity: min_read and min_write at least 1, each max at least its min."
  }

  validation {
    condition     = var.dynamodb_capacity.target >= 20 && var.dynamodb_capacity.target <= 90
    error_message = "dynamodb_capacity.target: from 20 to 90 percent (application autoscaling's range for DynamoDB)."
  }
}

variable "table_deletion_protection" {
  description = "Deletion protection of the DynamoDB table."
  type        = bool
  default     = true
}

variable "bucket_name" {
  description = "S3 bucket name (the filestore's `bucket`); null uses <name>-<account id>-<region>."
  type        = string
  default     = null
}

variable "s3_key_prefix" {
  description = "The filestore's `prefix` inside the bucket: empty, or ending with '/'. Lifecycle rules and grants follow it."
  type        = string
  default     = ""

  validation {
    condition     = var.s3_key_prefix == "" || can(regex("^([A-Za-z0-9._-]+/)+$", var.s3_key_prefix))
    error_message = "s3_key_prefix: empty, or relative path segments ending with '/'."
  }
}

variable "bucket_force_destroy" {
  description = "Let `terraform destroy` delete a bucket that still holds objects."
  type        = bool
  default     = false
}

variable "s3_versioning" {
  description = "Keep previous versions of S3 objects (stage logs and live state are rewritten often, so versions add storage)."
  type        = bool
  default     = false
}

variable "noncurrent_version_expiration_days" {
  description = "With s3_versioning, days after which previous versions are deleted."
  type        = number
  default     = 30
}

variable "stage_log_expiration_days" {
  description = "Days after which stage logs (<prefix>log/) expire; null keeps them."
  type        = number
  default     = 90
}

variable "command_output_expiration_days" {
  description = "Days after which command outputs such as plan-preview results (<prefix>command-output/) expire. The plan-preview-outputs job deletes them after 48 hours; this rule is the backstop. null keeps them."
  type        = number
  default     = 7
}

variable "secret_recovery_window_days" {
  description = "Days a deleted secret stays recoverable (0 deletes at once)."
  type        = number
  default     = 7
}

variable "generate_encryption_key" {
  description = "Generate the encryption key in Secrets Manager (64 random characters, through an ephemeral resource and a write-only attribute, so it never enters the Terraform state). false: put it yourself."
  type        = bool
  default     = false
}

# ---------------------------------------------------------------------------
# Optional ElastiCache (Redis)

variable "enable_redis" {
  description = "Create an ElastiCache cache (redis_mode: a node-based replication group, or ElastiCache Serverless for Valkey). The functions in redis_functions then run in the VPC (private_subnet_ids) and reach DynamoDB, S3 and Secrets Manager through VPC endpoints; the others stay out of the VPC with the in-process cache."
  type        = bool
  default     = false
}

variable "redis_functions" {
  description = "With enable_redis: the functions that use Redis and so run in the VPC. The others get WISP_CACHE=MEMORY and stay out of the VPC. http is left out by default: its SSO exchange calls GitHub or the OIDC provider on the internet, which the VPC reaches only through NAT (create_nat_gateway)."
  type        = set(string)
  default     = ["piped-api", "api", "web-api", "jobs"]

  validation {
    condition     = alltrue([for f in var.redis_functions : contains(["piped-api", "api", "web-api", "http", "jobs"], f)])
    error_message = "redis_functions: function keys among piped-api, api, web-api, http, jobs."
  }
}

variable "create_nat_gateway" {
  description = "With enable_redis: a NAT gateway (and its Elastic IP) in nat_gateway_subnet_id and a default route to it in each of private_route_table_ids, so that functions in the VPC reach the internet (needed for http in redis_functions: SSO). About $33 a month plus $0.045 per GB (docs/COSTS.md)."
  type        = bool
  default     = false
}

variable "nat_gateway_subnet_id" {
  description = "With create_nat_gateway: the public subnet of the NAT gateway; null uses alb_subnet_ids[0]."
  type        = string
  default     = null
}

variable "private_subnet_ids" {
  description = "With enable_redis: subnets of Redis, of the functions' network interfaces and of the Secrets Manager endpoint (at least two availability zones)."
  type        = list(string)
  default     = []
}

variable "private_route_table_ids" {
  description = "With enable_redis and create_vpc_endpoints: route tables of private_subnet_ids, for the DynamoDB and S3 gateway endpoints."
  type        = list(string)
  default     = []
}

variable "create_vpc_endpoints" {
  description = "With enable_redis: create the DynamoDB and S3 gateway endpoints and the Secrets Manager interface endpoint. false when the VPC already has them (or a NAT gateway)."
  type        = bool
  default     = true
}

variable "redis_mode" {
  description = "With enable_redis: \"node-based\" (a replication group of redis_node_type nodes, billed by the node-hour) or \"serverless\" (ElastiCache Serverless for Valkey, billed by the GB-hour stored, at least 100 MB, and by ECPU; docs/COSTS.md). A serverless cache takes IAM auth only."
  type        = string
  default     = "node-based"

  validation {
    condition     = contains(["node-based", "serverless"], var.redis_mode)
    error_message = "redis_mode: \"node-based\" or \"serverless\"."
  }
}

variable "redis_auth" {
  description = "With enable_redis: \"iam\" (an ElastiCache user with IAM auth; the functions in redis_functions sign short-lived tokens as their roles, granted elasticache:Connect, and find the cache by id through the ElastiCache API: no secret anywhere) or \"token\" (the AUTH token redis_auth_token; node-based only). null: \"token\" when redis_auth_token is set, else \"iam\"."
  type        = string
  default     = null

  validation {
    condition     = var.redis_auth == null || contains(["iam", "token"], coalesce(var.redis_auth, "iam"))
    error_message = "redis_auth: \"iam\", \"token\" or null."
  }
}

variable "redis_serverless_max_storage_gb" {
  description = "With redis_mode = \"serverless\": the most data the cache may hold, in GB (ElastiCache evicts beyond it); caps the storage bill. Wisp's cache holds small values: a fleet of 1,000 pipeds stays far below 1 GB."
  type        = number
  default     = 1

  validation {
    condition     = var.redis_serverless_max_storage_gb >= 1 && var.redis_serverless_max_storage_gb <= 5000
    error_message = "redis_serverless_max_storage_gb: 1 to 5,000."
  }
}

variable "redis_node_type" {
  description = "ElastiCache node type."
  type        = string
  default     = "cache.t4g.micro"
}

variable "redis_num_cache_clusters" {
  description = "Nodes in the replication group (2 or more turns on automatic failover and Multi-AZ)."
  type        = number
  default     = 1
}

variable "redis_engine_version" {
  description = "Redis engine version."
  type        = string
  default     = "7.1"
}

variable "redis_auth_token" {
  description = "With enable_redis and redis_auth = \"token\": the Redis AUTH token (16-128 printable characters, no @, \", /). ElastiCache has no write-only form of it, so it is in the Terraform state: keep the state encrypted. Put the same value in the config (cache.config.authToken)."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition     = var.redis_auth_token == null || can(regex("^[^@\"/ ]{16,128}$", var.redis_auth_token))
    error_message = "redis_auth_token: 16 to 128 printable characters without @, \" or /."
  }
}

# ---------------------------------------------------------------------------
# Alarms and dashboard (alarms.tf, dashboard.tf; docs/DEPLOY.md "Alarms and dashboard")

variable "create_alarms" {
  description = "Create the CloudWatch alarms (ALB 5xx, function errors and throttles, job failures and staleness, DynamoDB throttles and system errors, gRPC server errors)."
  type        = bool
  default     = true
}

variable "alarm_sns_topic_arn" {
  description = "SNS topic the alarms notify when they go into ALARM and back to OK; null creates the alarms with no actions (they still show in the console)."
  type        = string
  default     = null

  validation {
    condition     = var.alarm_sns_topic_arn == null || can(regex("^arn:aws[a-z-]*:sns:", var.alarm_sns_topic_arn))
    error_message = "alarm_sns_topic_arn: an SNS topic ARN (arn:aws:sns:...)."
  }
}

variable "alarm_thresholds" {
  description = "Alarm thresholds; each alarm goes off at or above its value within 5 minutes (jobs_stale_minutes: the window without any jobs invocation). Give only the ones to change."
  type = object({
    alb_5xx                = optional(number, 10) # HTTPCode_ELB_5XX_Count
    alb_target_5xx         = optional(number, 10) # HTTPCode_Target_5XX_Count
    alb_502                = optional(number, 3)  # HTTPCode_ELB_502_Count (failed inits)
    function_errors        = optional(number, 5)  # Lambda Errors, per API function
    function_throttles     = optional(number, 1)  # Lambda Throttles, per function
    job_failures           = optional(number, 1)  # Lambda Errors of the jobs function
    jobs_stale_minutes     = optional(number, 15) # minutes without a jobs invocation
    dynamodb_throttles     = optional(number, 10) # Read/WriteThrottleEvents, each
    dynamodb_system_errors = optional(number, 5)  # SystemErrors, summed over operations
    grpc_server_errors     = optional(number, 5)  # wisp_grpc_requests_total server_error, per function
    revocation_failures    = optional(number, 1)  # wisp_revocation_failures_total, summed over functions
  })
  default  = {}
  nullable = false

  validation {
    # jobs_stale_minutes counts one-minute periods: at least 2, so that one late schedule
    # is no alarm, and at most a day.
    condition     = alltrue([for k, v in var.alarm_thresholds : v > 0]) && var.alarm_thresholds.jobs_stale_minutes == floor(var.alarm_thresholds.jobs_stale_minutes) && var.alarm_thresholds.jobs_stale_minutes >= 2 && var.alarm_thresholds.jobs_stale_minutes <= 1440
    error_message = "alarm_thresholds: every value above 0; jobs_stale_minutes a whole number of minutes from 2 to 1440."
  }
}

variable "create_dashboard" {
  description = "Create the CloudWatch dashboard <name> (requests, errors, latency, connected pipeds, jobs, DynamoDB)."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------------------
# Compute

variable "compute" {
  description = "What serves the routes: \"lambda\" (a function per service, pipeds through wisp bridge) or \"fargate\" (wisp serve as an ECS service, arm64 or on Spot x86_64 by fargate_capacity, native gRPC for pipeds and pipectl, settings in fargate). The table, bucket, secrets and the jobs function are the same in both; docs/DEPLOY.md \"Fargate\" says how to switch."
  type        = string
  default     = "lambda"
  nullable    = false

  validation {
    condition     = contains(["lambda", "fargate"], var.compute)
    error_message = "compute: \"lambda\" or \"fargate\"."
  }
}

variable "fargate" {
  description = "With compute = \"fargate\": image (required: the image scripts/image builds, in a registry the tasks pull from; arm64, or amd64 with Spot in fargate_capacity), cpu and memory of a task (Fargate units), min_tasks and max_tasks (autoscaling bounds; min_tasks at least 2, across private_subnet_ids' zones), cpu_target (average CPU %) and requests_per_target (gRPC requests per task per minute) that autoscaling keeps, stop_timeout (seconds from SIGTERM to SIGKILL), assign_public_ip (tasks in public subnets, without NAT), on_demand_base (with fargate_capacity = \"mixed\": the tasks kept on on-demand Fargate, 1). docs/COSTS.md gives a task size per fleet size."
  type = object({
    image               = optional(string)
    cpu                 = optional(number, 512)
    memory              = optional(number, 1024)
    min_tasks           = optional(number, 2)
    max_tasks           = optional(number, 10)
    cpu_target          = optional(number, 60)
    requests_per_target = optional(number, 60000)
    stop_timeout        = optional(number, 30)
    assign_public_ip    = optional(bool, false)
    on_demand_base      = optional(number, 1)
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.fargate.min_tasks >= 2 && var.fargate.max_tasks >= var.fargate.min_tasks
    error_message = "fargate: min_tasks at least 2 (one per availability zone survives the loss of the other), max_tasks at least min_tasks."
  }

  validation {
    condition     = var.fargate.stop_timeout >= 15 && var.fargate.stop_timeout <= 120
    error_message = "fargate.stop_timeout: from 15 (wisp serve drains for up to 10 s) to 120 seconds (Fargate's most)."
  }

  validation {
    condition     = var.fargate.on_demand_base >= 1 && var.fargate.on_demand_base == floor(var.fargate.on_demand_base)
    error_message = "fargate.on_demand_base: a whole number of tasks, at least 1 (with fargate_capacity = \"mixed\", the on-demand tasks a Spot reclaim cannot take)."
  }
}

variable "fargate_capacity" {
  description = "With compute = \"fargate\": the capacity the tasks run on. \"on-demand\" (Fargate, arm64), \"spot\" (every task on Fargate Spot, about 70 % less per task-hour, but AWS may reclaim all of them at once with two minutes' notice) or \"mixed\" (fargate.on_demand_base tasks on Fargate, the rest on Fargate Spot). Fargate Spot runs x86_64 tasks only, so with \"spot\" and \"mixed\" every task is x86_64 and fargate.image must hold a linux/amd64 image (scripts/image build --arch all or amd64). docs/DEPLOY.md \"Fargate Spot\"; docs/COSTS.md prices each."
  type        = string
  default     = "on-demand"
  nullable    = false

  validation {
    condition     = contains(["on-demand", "spot", "mixed"], var.fargate_capacity)
    error_message = "fargate_capacity: \"on-demand\", \"spot\" or \"mixed\"."
  }

  validation {
    condition     = var.fargate_capacity == "on-demand" || var.compute == "fargate"
    error_message = "fargate_capacity: Spot is for the ECS tasks of compute = \"fargate\"; the functions of compute = \"lambda\" have no capacity to choose."
  }
}
