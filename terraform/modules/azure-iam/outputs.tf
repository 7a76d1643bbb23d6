output "publisher_client_id" {
  description = "Client id of the publisher identity: AZURE_CLIENT_ID for DefaultAzureCredential on the trainer (and the relay in copy mode)."
  value       = azurerm_user_assigned_identity.this["publisher"].client_id
}

output "worker_client_id" {
  description = "Client id of the shared worker identity: AZURE_CLIENT_ID for DefaultAzureCredential on the workers."
  value       = azurerm_user_assigned_identity.this["worker"].client_id
}

output "gc_client_id" {
  description = "Client id of the garbage-collector identity, the only one allowed to delete snapshots."
  value       = azurerm_user_assigned_identity.this["gc"].client_id
}

output "identity_ids" {
  description = "Resource ids of the three identities (publisher, worker, gc), to attach to VMs or to add federated credentials to."
  value       = { for k, i in azurerm_user_assigned_identity.this : k => i.id }
}

output "role_definition_ids" {
  description = "Resource ids of the reader, writer and deleter custom roles."
  value       = { for k, r in azurerm_role_definition.this : k => r.role_definition_resource_id }
}

output "assignments" {
  description = "The conditional role assignments: key -> scope, principal, role, principal_id, condition."
  value       = module.policy.assignments
}
