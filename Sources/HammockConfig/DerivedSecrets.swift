import FoundationEssentials
import HammockCore
import HammockJSON

/// Secrets that a plugin sends in another form than the one written: a rest source's
/// `auth: { basic: { username, password } }` goes out as base64 of `username:password`, which a server may
/// echo back (httpbin's /headers does) and which no redaction of the password alone would catch. Likewise
/// `auth: { oauth2: { client-id, client-secret, refresh-token } }`: the id and secret go to the token
/// endpoint as base64 of their form-encoded `id:secret` (RFC 6749 §2.3.1), and the secret and refresh token
/// form-encoded in a body (a space as `+`, which percent-encoding writes `%20`).
///
/// Only when the credentials hold a secret: literal ones in the file are configuration, as elsewhere.
func derivedSecrets(of sources: [SourceDefinition], secrets: Set<String>) -> Set<String> {
    var derived: Set<String> = []
    func holdsSecret(_ values: String...) -> Bool {
        secrets.contains { secret in !secret.isEmpty && values.contains { $0.contains(secret) } }
    }
    for source in sources {
        if let basic = source.options["auth"]?["basic"], let username = basic["username"]?.stringValue {
            let password = basic["password"]?.stringValue ?? ""
            if holdsSecret(username, password) {
                derived.insert(Data((username + ":" + password).utf8).base64EncodedString())
            }
        }
        if let oauth2 = source.options["auth"]?["oauth2"] {
            let id = oauth2["client-id"]?.stringValue ?? ""
            let secret = oauth2["client-secret"]?.stringValue ?? ""
            if !secret.isEmpty, holdsSecret(id, secret) {
                derived.insert(Data((formEncoded(id) + ":" + formEncoded(secret)).utf8).base64EncodedString())
            }
            for value in [secret, oauth2["refresh-token"]?.stringValue ?? ""] where !value.isEmpty && holdsSecret(value) {
                let encoded = formEncoded(value)
                if encoded != value { derived.insert(encoded) }
            }
        }
    }
    return derived
}

/// A value as the rest kind's OAuth2 requests write it.
private func formEncoded(_ text: String) -> String { PercentEncoding.formEncoded(text) }
