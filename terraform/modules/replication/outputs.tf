output "role_arn" {
  description = "ARN of the IAM role S3 assumes to replicate."
  value       = aws_iam_role.this.arn
}

output "role_name" {
  description = "Name of the replication IAM role."
  value       = aws_iam_role.this.name
}

output "rule_ids" {
  description = "IDs of the replication rules, one per (destination, replicated key prefix)."
  value       = [for r in local.rules : r.id]
}

output "replication_time_control" {
  description = "Whether Replication Time Control (15-minute SLA) is on."
  value       = var.replication_time_control
}
