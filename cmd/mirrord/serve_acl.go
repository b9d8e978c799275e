package main

import "flag"

// authorizerFlags declares the authorizer's server.properties keys as
// flags for the simple case (readServeConfig copies a set flag into the
// properties under Kafka's name, where the file's value loses).
func authorizerFlags(flags *flag.FlagSet) {
	flags.String("authorizer-class-name", "", "Kafka's authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer turns the ACL authorizer on (empty: none, everything allowed)")
	flags.String("super-users", "", "Kafka's super.users: principals allowed everything, separated by semicolons (User:admin;User:ops)")
	flags.Bool("allow-everyone-if-no-acl-found", false, "Kafka's allow.everyone.if.no.acl.found: a resource without ACLs is open to all")
}
