package security

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"testing"

	"github.com/sluice-io/sluice/internal/testcerts"
)

// TestPrincipalMapper: Kafka's SslPrincipalMapper examples (KIP-371):
// rules in order, the first matching the whole DN wins, L/U casing,
// DEFAULT, no match is an error; commas inside patterns and escapes.
func TestPrincipalMapper(t *testing.T) {
	kafkaRules := "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, " +
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, " +
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, " +
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT"
	for _, tc := range []struct {
		rules, dn, want string
		noMatch         bool
	}{
		{kafkaRules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke", false},
		{kafkaRules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme", false},
		{kafkaRules, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME", false},
		{kafkaRules, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE", false},
		{kafkaRules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US", false},
		{"", "CN=a,O=b", "CN=a,O=b", false},
		{"DEFAULT", "CN=a,O=b", "CN=a,O=b", false},
		{"RULE:^CN=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT", "CN=Alice,OU=eng,O=corp", "alice", false},
		{"RULE:^CN=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT", "O=corp", "O=corp", false},
		{"RULE:^CN=([a-zA-Z0-9.]*).*$/$1/", "O=corp", "", true},
		{"RULE:^CN=([a-z]*),O=corp$/$1/U", "CN=bob,O=corp,C=US", "", true}, // must match the whole DN
		{`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, `Tkac\, Adam`, false},
		{`RULE:^CN=(.*),O=(.*)$/$2\/$1/`, "CN=a,O=b", "b/a", false},
		{`RULE:^CN=(.*),O=(.*)$/$3-$12/`, "CN=a,O=b", "$3-a2", false}, // Kafka: $3 literal, $12 is $1 then 2
		{`RULE:^CN=(.*)$/x\$1/`, "CN=a", "x$1", false},
		{",,RULE:^CN=(.*)$/$1/,,,DEFAULT,,", "CN=a", "a", false},
	} {
		m, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		got, err := m.Map(tc.dn)
		if tc.noMatch {
			if !errors.Is(err, ErrNoMatchingRule) {
				t.Errorf("%q on %q: %q, %v; want no matching rule", tc.rules, tc.dn, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q on %q: %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
}

// TestPrincipalMapperInvalid: what Kafka's SslPrincipalMapperTest rejects,
// and what Go's regexp or Java's replacement syntax cannot take, fails at
// parse time.
func TestPrincipalMapperInvalid(t *testing.T) {
	for _, rules := range []string{
		"default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		"RULE:^CN=(a)\\1$/$1/", // backreference: not RE2
		"RULE:^CN=(.*$/$1/",    // unbalanced
		"RULE:^CN=.*$/$1/",     // no group to refer to
		"RULE:^CN=(.*)$/${x}/", // named references unsupported
	} {
		if m, err := ParsePrincipalMappingRules(rules); err == nil {
			t.Errorf("%q parsed: %v", rules, m)
		}
	}
}

// TestSubjectDN: the DN is RFC 2253 as Java's X500Principal.getName()
// writes it: most specific RDN first, values escaped, DC by name, other
// attribute types as OID=#hex.
func TestSubjectDN(t *testing.T) {
	ca := testcerts.NewCA(t, "dn")
	for _, tc := range []struct {
		subject pkix.Name
		want    string
	}{
		{pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"corp"}}, "CN=alice,OU=eng,O=corp"},
		{pkix.Name{CommonName: "Tkac, Adam", Country: []string{"CZ"}, Locality: []string{"Brno"}}, `CN=Tkac\, Adam,L=Brno,C=CZ`},
		{pkix.Name{CommonName: " x+y ", ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "example"},
		}}, `DC=example,CN=\ x\+y\ `}, // Go encodes ExtraNames last
		{pkix.Name{CommonName: "s", SerialNumber: "42"}, "2.5.4.5=#13023432,CN=s"},
	} {
		c := ca.Client("dn", tc.subject)
		if got := SubjectDN(c.Cert.Leaf); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.subject, got, tc.want)
		}
	}
}
