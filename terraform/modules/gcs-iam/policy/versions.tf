# Pure computation: no provider, so `terraform console` can render it offline
# (tests/terraform/test_terraform_gcs_azure_policies.py does).
terraform {
  required_version = ">= 1.3.0"
}
