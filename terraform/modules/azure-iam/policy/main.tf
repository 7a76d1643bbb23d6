# The role assignments of the three principals, as data: which custom role
# (reader, writer, deleter) each principal gets on which container, under which
# attribute-based condition on the blob path. modules/azure-iam turns each row
# into an azurerm_role_assignment.
#
# Azure replaces a blob with the write data action alone, so the publisher's
# compare-and-swap of LATEST (If-Match) and a worker's status rewrite need no
# delete. The publisher's one delete is on <prefix>/.uploads/, the markers the
# az:// store keeps while an upload is in progress. Nothing but the garbage
# collector may delete under <prefix>/v/.

locals {
  blob = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
  path = "@Resource[${local.blob}:path]"

  role_data_actions = {
    reader  = ["${local.blob}/read"]
    writer  = ["${local.blob}/write", "${local.blob}/add/action"]
    deleter = ["${local.blob}/delete"]
  }

  # Blob paths in conditions are relative to the container.
  run = var.prefix

  # Reads: Get Blob and friends on paths under the run; List Blobs (the
  # Blob.List suboperation of read, made on the container) only with a prefix
  # under the run.
  read_paths = "((!(ActionMatches{'${local.blob}/read'} AND NOT SubOperationMatches{'Blob.List'})) OR (${local.path} StringStartsWith '${local.run}/'))"
  list_paths = "((!(ActionMatches{'${local.blob}/read'} AND SubOperationMatches{'Blob.List'})) OR (@Request[${local.blob}:prefix] StringStartsWith '${local.run}/'))"
  reader     = var.list_scope == "prefix" ? "${local.read_paths} AND ${local.list_paths}" : local.read_paths

  scope = {
    versions = "${local.path} StringStartsWith '${local.run}/v/'"
    latest   = "${local.path} StringEquals '${local.run}/LATEST'"
    uploads  = "${local.path} StringStartsWith '${local.run}/.uploads/'"
    workers  = "${local.path} StringLike '${local.run}/workers/*.json'"
  }

  writer_unless  = "!(ActionMatches{'${local.blob}/write'}) AND !(ActionMatches{'${local.blob}/add/action'})"
  deleter_unless = "!(ActionMatches{'${local.blob}/delete'})"

  grants = {
    publisher = {
      reader  = local.reader
      writer  = "((${local.writer_unless}) OR (${local.scope.versions} OR ${local.scope.latest} OR ${local.scope.uploads}))"
      deleter = "((${local.deleter_unless}) OR (${local.scope.uploads}))"
    }
    worker = {
      reader = local.reader
      writer = "((${local.writer_unless}) OR (${local.scope.workers}))"
    }
    gc = {
      reader  = local.reader
      deleter = "((${local.deleter_unless}) OR (${local.scope.versions} OR ${local.scope.uploads}))"
    }
  }

  shared = merge([
    for label, scope in var.container_scopes : merge([
      for principal, roles in local.grants : merge([
        for role, condition in roles : {
          for key, id in lookup(var.principals, principal, {}) :
          "${label}/${principal}/${role}/${key}" => {
            scope        = scope
            principal    = principal
            role         = role
            principal_id = id
            condition    = condition
          }
        }
      ]...)
    ]...)
  ]...)

  # A worker whose identity is pinned to its id: read the run, write only its
  # own status blob.
  pinned = merge([
    for label, scope in var.container_scopes : merge([
      for id, principal_id in var.worker_status_principals : {
        for role, condition in {
          reader = local.reader
          writer = "((${local.writer_unless}) OR (${local.path} StringEquals '${local.run}/workers/${id}.json'))"
        } :
        "${label}/worker:${id}/${role}" => {
          scope        = scope
          principal    = "worker:${id}"
          role         = role
          principal_id = principal_id
          condition    = condition
        }
      }
    ]...)
  ]...)
}
