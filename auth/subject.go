package auth

// The subject of a certificate as Kafka sees it: Java's
// X500Principal.getName(), RFC 2253. Go's pkix.Name.String() is not it:
// it regroups the attributes it knows into fields (losing their order and
// multi-valued RDNs), names SERIALNUMBER and POSTALCODE where Java writes
// OIDs, writes OIDs for DC and UID where Java writes names, and escapes
// differently. So the subject is read from the certificate's raw DER:
//
//   - RDNs last to first, joined by ","; the attributes of a multi-valued
//     RDN in their DER order, joined by "+".
//   - CN, C, L, ST, O, OU, STREET, DC and UID by name; any other type as
//     its dotted OID with the value as "#" and the hex of its DER.
//   - A value of a string type (PrintableString, UTF8String, IA5String,
//     T61String, GeneralString, BMPString) as text (its bytes read as
//     UTF-8, as Java reads them), with , = + < > # ; " \
//     escaped by a backslash, NUL as \00, and leading and trailing spaces
//     (and carriage returns) escaped; any other type as "#" and hex.

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrSubject is a certificate subject that is not an RDN sequence.
var ErrSubject = errors.New("auth: certificate subject")

// rfc2253Keywords are the attribute types Java names in RFC 2253 output.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// attributeTypeAndValue keeps the value's tag and bytes, which Go's
// pkix.AttributeTypeAndValue throws away.
type attributeTypeAndValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// relativeDistinguishedNameSET is a SET OF (encoding/asn1 reads a slice
// type whose name ends in SET as a SET).
type relativeDistinguishedNameSET []attributeTypeAndValue

// SubjectName is cert's subject as Java's X500Principal.getName() writes
// it, the string ssl.principal.mapping.rules apply to.
func SubjectName(cert *x509.Certificate) (string, error) {
	return RDNSequenceName(cert.RawSubject)
}

// RDNSequenceName writes a DER Name (an RDN sequence) in RFC 2253 form.
func RDNSequenceName(der []byte) (string, error) {
	var rdns []relativeDistinguishedNameSET
	rest, err := asn1.Unmarshal(der, &rdns)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSubject, err)
	}
	if len(rest) != 0 {
		return "", fmt.Errorf("%w: %d bytes after the name", ErrSubject, len(rest))
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i != len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, atv := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeAttribute(&b, atv)
		}
	}
	return b.String(), nil
}

func writeAttribute(b *strings.Builder, atv attributeTypeAndValue) {
	keyword, named := rfc2253Keywords[atv.Type.String()]
	if !named {
		keyword = atv.Type.String()
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	text, isString := derString(atv.Value)
	if !named || !isString {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
		return
	}
	b.WriteString(escapeRFC2253(text))
}

// derString decodes the string types Java writes as text. Java reads
// the bytes of each as UTF-8, whatever the type says (a BMPString's zero
// bytes become NULs), with U+FFFD for bytes that are not UTF-8.
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagIA5String, asn1.TagT61String, asn1.TagUTF8String, asn1.TagBMPString, tagGeneralString:
	default:
		return "", false
	}
	var b strings.Builder
	for text := string(v.Bytes); text != ""; {
		r, width := utf8.DecodeRuneInString(text)
		b.WriteRune(r)
		text = text[width:]
	}
	return b.String(), true
}

const tagGeneralString = 27

// escapeRFC2253 is Java's AVA.toRFC2253String escaping of a text value.
func escapeRFC2253(value string) string {
	const escapees = ",=+<>#;\"\\"
	var escaped []rune
	for _, c := range value {
		switch {
		case strings.ContainsRune(escapees, c):
			escaped = append(escaped, '\\', c)
		case c == 0:
			escaped = append(escaped, '\\', '0', '0')
		default:
			escaped = append(escaped, c)
		}
	}
	lead := 0
	for lead < len(escaped) && (escaped[lead] == ' ' || escaped[lead] == '\r') {
		lead++
	}
	trail := len(escaped) - 1
	for trail >= 0 && (escaped[trail] == ' ' || escaped[trail] == '\r') {
		trail--
	}
	var b strings.Builder
	for i, c := range escaped {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
