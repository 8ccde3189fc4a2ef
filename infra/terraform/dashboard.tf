# The CloudWatch dashboard <name> (create_dashboard): requests, errors and latency at the
# load balancer and per function, gRPC calls by class and connected pipeds (the
# functions' own metrics, namespace local.metrics_namespace), the jobs, and the table.
# template.yaml builds the same widgets.

locals {
  function_names = { for k, f in aws_lambda_function.this : k => f.function_name }

  # One line per function of an AWS/Lambda metric, labelled with the function key.
  lambda_lines = {
    for metric in ["Invocations", "Errors"] : metric => [
      for k in keys(local.functions) : ["AWS/Lambda", metric, "FunctionName", local.function_names[k], { label = k }]
    ]
  }
  duration_lines = {
    for stat in ["p50", "p99"] : stat => [
      for k in keys(local.functions) : ["AWS/Lambda", "Duration", "FunctionName", local.function_names[k], { stat = stat, label = k }]
    ]
  }
  grpc_lines = flatten([
    for k in keys(local.routes) : [
      for class in ["server_error", "client_error"] :
      [local.metrics_namespace, "wisp_grpc_requests_total", "Deployment", var.name, "Function", k, "code_class", class, { label = "${k} ${class}" }]
    ]
  ])

  alb     = ["LoadBalancer", aws_lb.this.arn_suffix]
  jobs_fn = ["FunctionName", local.function_names["jobs"]]
  table   = ["TableName", aws_dynamodb_table.this.name]

  # Widgets on a 24-column grid, three to a row, 6 high.
  widgets = [
    {
      title   = "Requests (ALB)", x = 0, y = 0, width = 8, stat = "Sum"
      metrics = [concat(["AWS/ApplicationELB", "RequestCount"], local.alb, [{ label = "requests" }])]
    },
    {
      title = "ALB errors", x = 8, y = 0, width = 8, stat = "Sum"
      metrics = [
        concat(["AWS/ApplicationELB", "HTTPCode_ELB_5XX_Count"], local.alb, [{ label = "ALB 5xx" }]),
        concat(["AWS/ApplicationELB", "HTTPCode_ELB_502_Count"], local.alb, [{ label = "ALB 502 (failed inits)" }]),
        concat(["AWS/ApplicationELB", "HTTPCode_Target_5XX_Count"], local.alb, [{ label = "function 5xx" }]),
      ]
    },
    {
      title = "Latency at the ALB (TargetResponseTime, s)", x = 16, y = 0, width = 8, stat = "p50"
      metrics = [
        concat(["AWS/ApplicationELB", "TargetResponseTime"], local.alb, [{ stat = "p50", label = "p50" }]),
        concat(["AWS/ApplicationELB", "TargetResponseTime"], local.alb, [{ stat = "p99", label = "p99" }]),
      ]
    },
    {
      title   = "Invocations by function", x = 0, y = 6, width = 8, stat = "Sum"
      metrics = local.lambda_lines["Invocations"]
    },
    {
      title   = "Function errors (Lambda Errors)", x = 8, y = 6, width = 8, stat = "Sum"
      metrics = local.lambda_lines["Errors"]
    },
    {
      title   = "gRPC calls with errors (wisp_grpc_requests_total)", x = 16, y = 6, width = 8, stat = "Sum"
      metrics = local.grpc_lines
    },
    {
      title   = "Function duration p50 (ms)", x = 0, y = 12, width = 12, stat = "p50"
      metrics = local.duration_lines["p50"]
    },
    {
      title   = "Function duration p99 (ms)", x = 12, y = 12, width = 12, stat = "p99"
      metrics = local.duration_lines["p99"]
    },
    {
      title   = "Connected pipeds (wisp_pipeds_connected)", x = 0, y = 18, width = 8, stat = "Maximum"
      metrics = [[local.metrics_namespace, "wisp_pipeds_connected", "Deployment", var.name, "Function", "jobs", { label = "pipeds" }]]
    },
    {
      title = "Jobs", x = 8, y = 18, width = 8, stat = "Sum"
      metrics = [
        concat(["AWS/Lambda", "Invocations"], local.jobs_fn, [{ label = "runs" }]),
        concat(["AWS/Lambda", "Errors"], local.jobs_fn, [{ label = "failed runs" }]),
        concat(["AWS/Lambda", "Duration"], local.jobs_fn, [{ stat = "Maximum", label = "longest run (ms)", yAxis = "right" }]),
      ]
    },
    {
      title = "DynamoDB", x = 16, y = 18, width = 8, stat = "Sum"
      metrics = [
        concat(["AWS/DynamoDB", "ConsumedReadCapacityUnits"], local.table, [{ label = "read units" }]),
        concat(["AWS/DynamoDB", "ConsumedWriteCapacityUnits"], local.table, [{ label = "write units" }]),
        concat(["AWS/DynamoDB", "ReadThrottleEvents"], local.table, [{ label = "read throttles", yAxis = "right" }]),
        concat(["AWS/DynamoDB", "WriteThrottleEvents"], local.table, [{ label = "write throttles", yAxis = "right" }]),
      ]
    },
  ]
}

resource "aws_cloudwatch_dashboard" "this" {
  count          = var.create_dashboard ? 1 : 0
  dashboard_name = var.name
  dashboard_body = jsonencode({
    widgets = [
      for w in local.widgets : {
        type   = "metric"
        x      = w.x
        y      = w.y
        width  = w.width
        height = 6
        properties = {
          title   = w.title
          region  = local.region
          view    = "timeSeries"
          stacked = false
          period  = 300
          stat    = w.stat
          metrics = w.metrics
        }
      }
    ]
  })
}
