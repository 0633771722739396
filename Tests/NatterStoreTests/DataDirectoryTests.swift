import Foundation
import Testing

@testable import NatterStore

@Suite struct DataDirectoryTests {
    @Test(arguments: [
        ("a", "."), ("a/b", "a"), ("/a", "/"), ("/a/b/c", "/a/b"), ("./a", "."), ("../x/y", "../x"),
    ])
    func parentOfEveryPathShape(path: String, parent: String) {
        #expect(DataDirectory(path: path).parent == parent)
    }

    @Test func trailingSlashIsIgnored() {
        #expect(DataDirectory(path: "/tmp/natter/").path == "/tmp/natter")
        #expect(DataDirectory(path: "/tmp/natter/").parent == "/tmp")
    }

    @Test func createMakesAPrivateDirectoryWithItsParents() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-dd-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let directory = DataDirectory(path: root + "/nested/data")
        try directory.create()
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        try directory.create()  // a second call is fine
    }
}
