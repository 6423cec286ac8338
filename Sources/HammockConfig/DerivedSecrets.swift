import FoundationEssentials
import HammockCore
import HammockJSON

/// Secrets that a plugin sends in another form than the one written: a rest source's
/// `auth: { basic: { username, password } }` goes out as base64 of `username:password`, which a server may
/// echo back (httpbin's /headers does) and which no redaction of the password alone would catch.
///
/// Only when the credentials hold a secret: literal ones in the file are configuration, as elsewhere.
func derivedSecrets(of sources: [SourceDefinition], secrets: Set<String>) -> Set<String> {
    var derived: Set<String> = []
    for source in sources {
        guard let basic = source.options["auth"]?["basic"], let username = basic["username"]?.stringValue else { continue }
        let password = basic["password"]?.stringValue ?? ""
        guard secrets.contains(where: { !$0.isEmpty && (username.contains($0) || password.contains($0)) }) else { continue }
        derived.insert(Data((username + ":" + password).utf8).base64EncodedString())
    }
    return derived
}
