data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.name

  table_name  = coalesce(var.table_name, var.name)
  bucket_name = coalesce(var.bucket_name, "${var.name}-${local.account_id}-${local.region}")
  # domain_name is required (the listener's precondition says so); the fallback only keeps
  # the outputs evaluable until then.
  host = coalesce(var.domain_name, aws_lb.this.dns_name)

  # compute = "fargate": `wisp serve` on ECS serves every route (fargate.tf); only the
  # jobs function stays, on its EventBridge schedules (docs/DEPLOY.md "Fargate").
  fargate = var.compute == "fargate"

  # The Lambda functions: key => the cargo binary (functions/<key>, `[[bin]] name`).
  functions = local.fargate ? { for k, v in local.all_functions : k => v if k == "jobs" } : local.all_functions
  all_functions = {
    "piped-api" = "wisp-piped-api"
    "api"       = "wisp-api"
    "web-api"   = "wisp-web-api"
    "http"      = "wisp-http"
    "jobs"      = "wisp-jobs"
  }

  # ALB path patterns per function: each gRPC service under its current name and under
  # upstream's legacy `/pipe.api.service.` alias. The http function is the listener's
  # default action and has no patterns. tests/infra_routes.rs checks these lists against
  # the services the code serves. The pipeds' OTLP spans (TraceService, no legacy name,
  # and OTLP/HTTP's /v1/traces) go to the function that checks piped tokens.
  routes = {
    "piped-api" = [
      "/grpc.service.pipedservice.PipedService/*",
      "/pipe.api.service.pipedservice.PipedService/*",
      "/opentelemetry.proto.collector.trace.v1.TraceService/*",
      "/v1/traces",
    ]
    "api" = [
      "/grpc.service.apiservice.APIService/*",
      "/pipe.api.service.apiservice.APIService/*",
    ]
    "web-api" = [
      "/grpc.service.webservice.WebService/*",
      "/pipe.api.service.webservice.WebService/*",
    ]
  }

  # Listener rule priority per routed function.
  route_priority = {
    "piped-api" = 10
    "api"       = 20
    "web-api"   = 30
  }

  # Functions the ALB invokes: the routed ones and the default (http).
  alb_functions = local.fargate ? toset([]) : setunion(keys(local.routes), ["http"])

  # The console's functions sign sessions with the encryption key; the others never read it.
  needs_encryption_key = toset(["web-api", "http"])

  # With Redis, the functions in redis_functions run in the VPC; the others stay out of it
  # and keep the in-process cache (WISP_CACHE=MEMORY) instead of timing out on Redis.
  vpc_functions              = var.enable_redis ? setintersection(var.redis_functions, keys(local.functions)) : toset([])
  in_process_cache_functions = var.enable_redis ? setsubtract(keys(local.functions), var.redis_functions) : toset([])

  # The alias the load balancer and the schedules invoke: a release is a new version, a
  # rollback moves the alias back (docs/DEPLOY.md "Rolling back").
  alias_name = "live"

  memory_size = { for k in keys(local.functions) : k => lookup(var.memory_size, k, 128) }
  timeout     = { for k in keys(local.functions) : k => lookup(var.timeout, k, k == "jobs" ? 300 : 30) }

  jobs = { for job, schedule in var.job_schedules : job => schedule if schedule != null }

  # CloudWatch namespace of the functions' own metrics (WISP_METRICS_NAMESPACE).
  metrics_namespace = "Wisp"

  tags = merge({ "app" = "wisp" }, var.tags)
}
