//go:build tools

// Tools module: pins kustomize v5.8.2 (api v0.21.2; v5.8.3 needs a newer Go
// than the project's), which `make bundle` builds into bin/ to render the
// deploy/ bundle. Nothing here is compiled into walctl.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5"
