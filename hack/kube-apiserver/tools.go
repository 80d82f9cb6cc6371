//go:build tools

// Package tools pins k8s.io/kubernetes/cmd/kube-apiserver so that
//
//	go build -o ../../bin/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
//
// works from this module. Nothing here is compiled into walctl.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
