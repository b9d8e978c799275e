package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
)

// scramClientFinal is a SCRAM-SHA-512 client's final message for
// serverFirst, its nonce chosen by nonce (the server-first nonce in, the
// r= to send out), and the server signature it expects.
func scramClientFinal(t *testing.T, clientFirstBare, serverFirst, password, channelBinding string, nonce func(string) string) (string, string) {
	t.Helper()
	attrs, err := scramAttributes(serverFirst)
	if err != nil || len(attrs) != 3 {
		t.Fatalf("server-first %q: %v", serverFirst, err)
	}
	salt, _ := base64.StdEncoding.DecodeString(attrs[1].value)
	iterations, _ := strconv.Atoi(attrs[2].value)
	salted, err := pbkdf2.Key(sha512.New, password, salt, iterations, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, text string) []byte {
		m := hmac.New(sha512.New, key)
		m.Write([]byte(text))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha512.Sum512(clientKey)
	withoutProof := "c=" + channelBinding + ",r=" + nonce(attrs[0].value)
	authMessage := clientFirstBare + "," + serverFirst + "," + withoutProof
	proof := make([]byte, len(clientKey))
	subtle.XORBytes(proof, clientKey, mac(storedKey[:], authMessage))
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof),
		"v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), authMessage))
}

// The exchange as Kafka's ScramSaslServer runs it: librdkafka's final
// nonce (its own before the server's whole one) is accepted, as Kafka
// accepts any nonce ending with the server's; a nonce that does not, a
// channel binding other than the gs2 header, a proof of another password
// and an authorization ID of another user are refused.
func TestScramExchangeAsKafka(t *testing.T) {
	store := scramStore(t, "ali,ce", "alice-secret", 4096)
	mechanism, err := NewScram(MechanismScramSHA512, store)
	if err != nil {
		t.Fatal(err)
	}
	const clientNonce = "rOprNGfwEbeRWgbNEkqO"
	same := func(n string) string { return n }
	for _, tc := range []struct {
		name, gs2, password, channelBinding string
		nonce                               func(string) string
		message                             string // "" succeeds
	}{
		{"RFC 5802", "n,,", "alice-secret", "biws", same, ""},
		{"librdkafka", "n,,", "alice-secret", "biws", func(n string) string { return clientNonce + n }, ""},
		{"authzid of the user", "n,a=ali=2Cce,", "alice-secret", base64.StdEncoding.EncodeToString([]byte("n,a=ali=2Cce,")), same, ""},
		{"nonce not the server's", "n,,", "alice-secret", "biws", func(n string) string { return n + "x" }, "invalid credentials"},
		{"channel binding", "n,,", "alice-secret", "eSws", same, "invalid credentials"},
		{"wrong password", "n,,", "wrong", "biws", same, "invalid credentials"},
		{"authzid of another user", "n,a=bob,", "alice-secret", "biws", same, "different from username"},
	} {
		exchange := mechanism.NewExchange()
		bare := "n=ali=2Cce,r=" + clientNonce
		serverFirst, done, err := exchange.Step([]byte(tc.gs2 + bare))
		if err != nil || done {
			if tc.message != "" && strings.Contains(failMessage(err), tc.message) {
				continue
			}
			t.Fatalf("%s: client-first: %v, done %t", tc.name, err, done)
		}
		final, signature := scramClientFinal(t, bare, string(serverFirst), tc.password, tc.channelBinding, tc.nonce)
		answer, done, err := exchange.Step([]byte(final))
		switch {
		case tc.message == "" && (err != nil || !done || string(answer) != signature):
			t.Errorf("%s: %q, done %t, %v; want %q", tc.name, answer, done, err, signature)
		case tc.message != "" && !strings.Contains(failMessage(err), tc.message):
			t.Errorf("%s: %v, want a failure saying %q", tc.name, err, tc.message)
		case tc.message == "" && exchange.Principal() != User("ali,ce"):
			t.Errorf("%s: principal %v", tc.name, exchange.Principal())
		}
		if _, _, err := exchange.Step([]byte(final)); err == nil {
			t.Errorf("%s: a step after the end succeeded", tc.name)
		}
	}
}
