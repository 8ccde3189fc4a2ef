# The functions read the control-plane config and the encryption key from these secrets
# during init. The module creates the secrets, not their values: the config names the
# stores (and Redis' AUTH token) and the projects' admins, and the operator puts it with
# `aws secretsmanager put-secret-value` (docs/DEPLOY.md), so it never enters the state.
# Both secrets are kept when the module is destroyed or replaced, like the table and the
# bucket: the key seals the SSO client secrets stored in the table.

resource "aws_secretsmanager_secret" "config" {
  #checkov:skip=CKV2_AWS_57:The config is a document, not a credential Secrets Manager can rotate; the operator replaces it with put-secret-value.
  name                    = "${var.name}/config"
  description             = "Wisp control-plane-config.yaml (WISP_CONFIG_SECRET)"
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = var.secret_recovery_window_days
  tags                    = local.tags

  # Retained like the table and the bucket: a destroy or a replacement is refused
  # (infra/terraform/README.md "Tearing down").
  lifecycle {
    prevent_destroy = true
  }
}

resource "aws_secretsmanager_secret" "encryption_key" {
  #checkov:skip=CKV2_AWS_57:Rotating the key signs out every console session and makes stored SSO secrets unreadable; it is replaced deliberately, not on a schedule.
  name                    = "${var.name}/encryption-key"
  description             = "Wisp encryption key: signs console sessions, seals SSO secrets (WISP_ENCRYPTION_KEY_SECRET)"
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = var.secret_recovery_window_days
  tags                    = local.tags

  # Retained like the table and the bucket: a destroy or a replacement is refused
  # (infra/terraform/README.md "Tearing down").
  lifecycle {
    prevent_destroy = true
  }
}

# With generate_encryption_key, the key is two version-4 UUIDs without their dashes: 64 hex
# characters, 244 random bits from the operating system's CSPRNG (Terraform's uuid()).
# uuid() is only evaluated at apply, so planning calls nothing; the key goes to the secret
# through a write-only attribute, so neither the plan nor the state holds it. Bump
# secret_string_wo_version to write a new one.
resource "aws_secretsmanager_secret_version" "encryption_key" {
  count                    = var.generate_encryption_key ? 1 : 0
  secret_id                = aws_secretsmanager_secret.encryption_key.id
  secret_string_wo         = replace("${uuid()}${uuid()}", "-", "")
  secret_string_wo_version = 1
}
