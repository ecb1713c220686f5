//! Helpers the etcd store's tests share: a real etcd on 127.0.0.1 and a
//! proxy that can lose etcd's answers.

#![allow(dead_code)]

pub mod etcd;
pub mod proxy;
