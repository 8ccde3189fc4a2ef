terraform {
  # 1.11: write-only attributes (`secret_string_wo`), which keep a generated
  # encryption key out of the state; ephemeral resources need 1.10.
  required_version = ">= 1.11"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.100: ephemeral `aws_secretsmanager_random_password` and `secret_string_wo`.
      version = ">= 5.100, < 7.0"
    }
  }
}
