# Homebrew formula for the installable Orchard. scripts/pack.sh writes a copy next to the tarball it
# builds (dist/orchard.rb) with @URL@ and @SHA256@ filled in; then:
#   brew install --formula ./dist/orchard.rb
# Its install is exactly the npm one (`npm install -g orchard-VERSION.tgz`), into the formula's prefix.
# Homebrew does not run on the machines Orchard is developed on: this file is checked there for what it
# says (test/install/tarball.test.ts), never run by brew. (`brew audit` will also want a `homepage` line,
# once the project has a public address.)
class Orchard < Formula
  desc "Turn the Macs and Linux boxes on a desk into one inference machine"
  url "@URL@"
  sha256 "@SHA256@"
  license "MIT"

  depends_on "node@20"

  def install
    # std_npm_args: npm install -g --prefix=libexec of the downloaded tarball, with Homebrew's cache.
    system "npm", "install", *std_npm_args
    bin.install_symlink libexec.glob("bin/*")
  end

  service do
    run [opt_bin/"orchard", "start"]
    keep_alive true
    log_path var/"log/orchard.log"
    error_log_path var/"log/orchard.log"
  end

  test do
    assert_match "orchard #{version}", shell_output("#{bin}/orchard --version")
  end
end
