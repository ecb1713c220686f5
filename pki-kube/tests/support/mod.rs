//! Helpers pki-kube's tests share: a real kube-apiserver on 127.0.0.1.

#![allow(dead_code)]

pub mod kube;
