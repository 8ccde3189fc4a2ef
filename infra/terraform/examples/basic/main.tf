# The smallest Wisp deployment: the module with its defaults, no Redis (so no VPC for the
# functions), in an existing VPC's public subnets. See docs/DEPLOY.md.

# The region and the credentials come from the environment (AWS_REGION or the profile's
# region), as for the AWS CLI and the wisp admin commands.
provider "aws" {}

module "wisp" {
  source = "../.."

  name            = var.name
  artifacts_dir   = var.artifacts_dir
  vpc_id          = var.vpc_id
  alb_subnet_ids  = var.public_subnet_ids
  certificate_arn = var.certificate_arn
  domain_name     = var.domain_name
  route53_zone_id = var.route53_zone_id

  generate_encryption_key = true
  config_revision         = var.config_revision

  # The alarms exist either way; with a topic they also notify it (e.g. an email
  # subscription). The dashboard is named after `name`.
  alarm_sns_topic_arn = var.alarm_sns_topic_arn

  tags = {
    "environment" = "example"
  }
}
