package auth

import (
	"encoding/asn1"
	"testing"
)

// An attribute of a test subject: its type, DER tag and value bytes.
type testAttribute struct {
	oid   string
	tag   int
	value string
}

type subjectCase struct {
	name string
	rdns [][]testAttribute // first to last, as in the DER
	want string            // what Java's X500Principal.getName() returned
}

func (c subjectCase) der(t *testing.T) []byte {
	t.Helper()
	var rdns []relativeDistinguishedNameSET
	for _, rdn := range c.rdns {
		var set relativeDistinguishedNameSET
		for _, a := range rdn {
			var oid asn1.ObjectIdentifier
			for _, part := range splitOID(a.oid) {
				oid = append(oid, part)
			}
			set = append(set, attributeTypeAndValue{Type: oid, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: a.tag, Bytes: []byte(a.value)}})
		}
		rdns = append(rdns, set)
	}
	der, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func splitOID(s string) []int {
	var parts []int
	n := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			parts = append(parts, n)
			n = 0
			continue
		}
		n = n*10 + int(s[i]-'0')
	}
	return parts
}

const (
	oidCN, oidOU, oidO, oidC, oidL, oidST = "2.5.4.3", "2.5.4.11", "2.5.4.10", "2.5.4.6", "2.5.4.7", "2.5.4.8"
	oidStreet, oidSerial, oidPostalCode   = "2.5.4.9", "2.5.4.5", "2.5.4.17"
	oidDC, oidUID, oidEmail               = "0.9.2342.19200300.100.1.25", "0.9.2342.19200300.100.1.1", "1.2.840.113549.1.9.1"
	tagUTF8, tagPrintable, tagIA5, tagT61 = asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, asn1.TagT61String
	tagBMP, tagInteger, tagUniversal      = asn1.TagBMPString, asn1.TagInteger, 28
)

func one(oid string, tag int, value string) []testAttribute {
	return []testAttribute{{oid, tag, value}}
}

// The subjects, and what Kafka 4.4 on OpenJDK 17 made of each
// (new X500Principal(der).getName()).
var subjectCases = []subjectCase{
	{"typical", [][]testAttribute{one(oidC, tagPrintable, "US"), one(oidO, tagUTF8, "corp"), one(oidOU, tagUTF8, "eng"), one(oidCN, tagUTF8, "alice")}, "CN=alice,OU=eng,O=corp,C=US"},
	{"all named types", [][]testAttribute{one(oidDC, tagIA5, "com"), one(oidDC, tagIA5, "example"), one(oidST, tagUTF8, "MD"), one(oidL, tagUTF8, "Fulton"), one(oidStreet, tagUTF8, "1 Main St"), one(oidUID, tagUTF8, "u42"), one(oidCN, tagPrintable, "bob")}, "CN=bob,UID=u42,STREET=1 Main St,L=Fulton,ST=MD,DC=example,DC=com"},
	{"types Go names and Java does not", [][]testAttribute{one(oidSerial, tagPrintable, "1234"), one(oidPostalCode, tagUTF8, "20500"), one(oidEmail, tagIA5, "alice@corp.com"), one(oidCN, tagUTF8, "alice")}, "CN=alice,1.2.840.113549.1.9.1=#160e616c69636540636f72702e636f6d,2.5.4.17=#0c053230353030,2.5.4.5=#130431323334"},
	{"multi-valued RDN", [][]testAttribute{one(oidO, tagUTF8, "corp"), {{oidCN, tagUTF8, "alice"}, {oidUID, tagUTF8, "a1"}}}, "CN=alice+UID=a1,O=corp"},
	{"escaped characters", [][]testAttribute{one(oidOU, tagUTF8, `a=b+c<d>e;f"g\h`), one(oidCN, tagUTF8, "Tkac, Adam")}, "CN=Tkac\\, Adam,OU=a\\=b\\+c\\<d\\>e\\;f\\\"g\\\\h"},
	{"hash and spaces", [][]testAttribute{one(oidO, tagUTF8, "#1 corp"), one(oidOU, tagUTF8, "  two leading"), one(oidCN, tagUTF8, "trailing  ")}, "CN=trailing\\ \\ ,OU=\\ \\ two leading,O=\\#1 corp"},
	{"inner hash and NUL", [][]testAttribute{one(oidCN, tagUTF8, "a#b\x00c")}, "CN=a\\#b\\00c"},
	{"unicode and symbols", [][]testAttribute{one(oidCN, tagUTF8, "Zoë_Ω*&@!'()-./:?")}, "CN=Zo\u00eb_\u03a9*&@!'()-./:?"},
	{"BMPString", [][]testAttribute{one(oidCN, tagBMP, "\x00a\x00l\x00\xe9")}, "CN=\\00a\\00l\\00\ufffd"},
	{"T61String", [][]testAttribute{one(oidCN, tagT61, "caf\xe9")}, "CN=caf\ufffd"},
	{"non-string value", [][]testAttribute{one(oidCN, tagInteger, "\x05"), one(oidOU, tagUniversal, "\x00\x00\x00x")}, "OU=#1c0400000078,CN=#020105"},
	{"invalid UTF-8", [][]testAttribute{one(oidCN, tagUTF8, "a\xffb")}, "CN=a\ufffdb"},
	{"empty value", [][]testAttribute{one(oidCN, tagUTF8, ""), one(oidOU, tagUTF8, " ")}, "OU=\\ ,CN="},
	{"carriage return", [][]testAttribute{one(oidCN, tagUTF8, "\ra\r")}, "CN=\\\ra\\\r"},
	{"no RDNs", nil, ""},
}

func TestSubjectName(t *testing.T) {
	for _, c := range subjectCases {
		got, err := RDNSequenceName(c.der(t))
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
