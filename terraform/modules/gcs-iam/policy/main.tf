# The bucket IAM bindings of the three principals, as data: which custom role
# (reader, creator, deleter) each member gets on which bucket, under which IAM
# condition on the object name. modules/gcs-iam turns each row into a
# google_storage_bucket_iam_member.
#
# GCS needs storage.objects.delete to *replace* an object, so whoever moves
# LATEST (the publisher, by compare-and-swap on its generation) or rewrites a
# status object (a worker) also holds delete on exactly those names. The
# publisher's other delete is on <prefix>/.uploads/, where the gs:// store
# stages the parts of a large upload and removes them after compose. Nothing
# but the garbage collector may delete under <prefix>/v/.

locals {
  role_permissions = {
    reader  = ["storage.objects.get", "storage.objects.list"]
    creator = ["storage.objects.create"]
    deleter = ["storage.objects.delete"]
  }

  # Object resource names in IAM conditions: projects/_/buckets/<bucket>/objects/<key>.
  run = { for b in var.bucket_names : b => "projects/_/buckets/${b}/objects/${var.prefix}" }

  # A list request is made on the bucket; its prefix is an API attribute.
  list_expr = {
    for b in var.bucket_names : b => (
      var.list_scope == "prefix"
      ? "api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('${var.prefix}/')"
      : "resource.name == 'projects/_/buckets/${b}'"
    )
  }

  scope = {
    for b, o in local.run : b => {
      read     = "resource.name.startsWith('${o}/') || ${local.list_expr[b]}"
      versions = "resource.name.startsWith('${o}/v/')"
      latest   = "resource.name == '${o}/LATEST'"
      uploads  = "resource.name.startsWith('${o}/.uploads/')"
      workers  = "resource.name.startsWith('${o}/workers/') && resource.name.endsWith('.json')"
    }
  }

  # principal -> role -> the names it applies to, per bucket.
  grants = {
    for b, s in local.scope : b => {
      publisher = {
        reader  = s.read
        creator = "${s.versions} || ${s.latest} || ${s.uploads}"
        deleter = "${s.latest} || ${s.uploads}"
      }
      worker = {
        reader  = s.read
        creator = s.workers
        deleter = s.workers
      }
      gc = {
        reader  = s.read
        deleter = "${s.versions} || ${s.uploads}"
      }
    }
  }

  shared = merge([
    for b in var.bucket_names : merge([
      for principal, roles in local.grants[b] : merge([
        for role, expr in roles : {
          for key, member in lookup(var.members, principal, {}) :
          "${b}/${principal}/${role}/${key}" => {
            bucket     = b
            principal  = principal
            role       = role
            member     = member
            title      = "wanrl-s3 ${principal} ${role}"
            expression = expr
          }
        }
      ]...)
    ]...)
  ]...)

  # A worker whose identity is pinned to its id: read the run, replace only
  # its own status object.
  pinned = merge([
    for b, o in local.run : merge([
      for id, member in var.worker_status_members : {
        for role, expr in {
          reader  = local.scope[b].read
          creator = "resource.name == '${o}/workers/${id}.json'"
          deleter = "resource.name == '${o}/workers/${id}.json'"
        } :
        "${b}/worker:${id}/${role}" => {
          bucket     = b
          principal  = "worker:${id}"
          role       = role
          member     = member
          title      = "wanrl-s3 worker ${id} ${role}"
          expression = expr
        }
      }
    ]...)
  ]...)
}
