package mirrordtest

// KeyPEM is a P-256 key (PKCS#8), and KeyAES256PEM and KeyAES128PEM the
// same key encrypted with password "secret" by OpenSSL 3 (Kafka's PEM
// keystores with ssl.key.password), for tests of the PEM stores:
//
//	openssl pkcs8 -topk8 -v2 aes-256-cbc -v2prf hmacWithSHA256 -iter 2048 -passout pass:secret
//	openssl pkcs8 -topk8 -v2 aes-128-cbc -v2prf hmacWithSHA1 -iter 1000 -passout pass:secret
const (
	KeyPEM = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaeCYOjBgS8N1I+m4
HINT026FJU35evM5JBHhp1fmbF+hRANCAAS51r8XjwO/NQ9rr+HGi1axyy15FAUL
LvBzHQH4rzRy4oNcmOWpwVHY2a9RiLdOIWRudjXjugltE4BaylFzxcd8
-----END PRIVATE KEY-----
`
	KeyAES256PEM = `-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAj7WzeOoh23PwICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEJC2DO4d4LTy35p1T/IPOMEEgZAP
/Yv3XiyYDH9uBD0NzAL+lSIon7p6TV0efPpO1JP2pZwYcIPVCqUlIEOnHOo/a4Uz
vmGcQXzWm1E7zCizxnrFmudlmY+kwUpBZHAbDnxBZpCwFfO0MJYLlvjd1sbf2dsf
NcYq+dvZ5udPeFlPnGp7qDJGqBx/iZIXm6p/8Q/JCvGrtNtzRHEYOpWi9aMqnJA=
-----END ENCRYPTED PRIVATE KEY-----
`
	KeyAES128PEM = `-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHeMEkGCSqGSIb3DQEFDTA8MBsGCSqGSIb3DQEFDDAOBAiUka5U/u6JCQICA+gw
HQYJYIZIAWUDBAECBBDrqawFE8pvw0GJ/b3z26w5BIGQvJazoTSWEaODBWyC2CqW
Ul8upFIPEYaOSj/Nk8DZKYGAepMphSmIJ1Q/C1NuB5wR1WB9IIjUMljVxa5B4qwa
nPE9pv7ZLtUqXRMx1YUiOREiC+aPAJcUmiZla1AKA1XUC4mpOJaqrTU8PTaDu4zI
UtL2+7BHvz1NSiwYlXhQW7GhqApr8d/8WxiBnASkBQHo
-----END ENCRYPTED PRIVATE KEY-----
`
)
