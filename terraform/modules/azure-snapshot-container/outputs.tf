output "storage_account_id" {
  description = "Resource id of the storage account."
  value       = azurerm_storage_account.this.id
}

output "account_name" {
  description = "Name of the storage account."
  value       = azurerm_storage_account.this.name
}

output "container_name" {
  description = "Name of the container."
  value       = azurerm_storage_container.this.name
}

output "container_scope" {
  description = "Resource Manager id of the container: the scope modules/azure-iam assigns roles at."
  value       = azurerm_storage_container.this.id
}

output "location" {
  description = "Azure region of the storage account."
  value       = azurerm_storage_account.this.location
}

output "prefix" {
  description = "Run prefix inside the container."
  value       = var.prefix
}

output "url" {
  description = "az:// URL of the run prefix (az://<container>@<account>/<prefix>), as the regions file and the CLI take it."
  value       = "az://${azurerm_storage_container.this.name}@${azurerm_storage_account.this.name}/${var.prefix}"
}

output "endpoint_url" {
  description = "Blob service endpoint of the account for the regions file (https://<account>.blob.core.windows.net in the public cloud)."
  value       = trimsuffix(azurerm_storage_account.this.primary_blob_endpoint, "/")
}

output "price_class" {
  description = "Price class for the regions file and the planner: azure:<region>."
  value       = "azure:${azurerm_storage_account.this.location}"
}

output "versioning_enabled" {
  description = "Whether blob versioning is on."
  value       = var.versioning_enabled
}
