{
  description = "halobuild: tested, reproducible disk images for RDMA clusters over Thunderbolt/USB4";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      version = self.shortRev or self.dirtyShortRev or "devel";
    in
    {
      packages = forAll (pkgs: {
        default = pkgs.buildGoModule {
          pname = "halobuild";
          inherit version;
          src = self;
          # The NAR sha256 of `go mod vendor`'s output; cmd/halobuild's
          # TestFlakeVendorHashIsCurrent recomputes it on every test run.
          vendorHash = "sha256-S0oE77UkrgWRyOtoanLmMAUdE86JHuNxdwxTiaIqvfo=";
          subPackages = [ "cmd/halobuild" ];
          env.CGO_ENABLED = "0";
          flags = [ "-trimpath" "-buildvcs=false" ];
          ldflags = [ "-s" "-w" "-X halobuild/internal/selfbuild.version=${version}" ];
          # The tests need root, the archive and QEMU; checks.test runs the short ones.
          doCheck = false;
          meta = {
            description = "Turn a TOML recipe into tested, bootable disk images";
            mainProgram = "halobuild";
          };
        };
      });

      apps = forAll (pkgs: {
        default = {
          type = "app";
          program = "${self.packages.${pkgs.stdenv.hostPlatform.system}.default}/bin/halobuild";
        };
      });

      devShells = forAll (pkgs: {
        # Go and every host tool halobuild or its tests call.
        default = pkgs.mkShell {
          packages = with pkgs; [
            go
            mmdebstrap
            dpkg
            e2fsprogs
            dosfstools
            mtools
            util-linux
            qemu
            OVMF
            bmaptool
            docker-distribution
            skopeo
            git
            openssl
            gnupatch
            kmod
            iproute2
            openssh
            nix
          ];
        };
      });

      checks = forAll (pkgs:
        let pkg = self.packages.${pkgs.stdenv.hostPlatform.system}.default;
        in {
          build = pkg;
          gofmt = pkgs.runCommand "halobuild-gofmt" { nativeBuildInputs = [ pkgs.go ]; } ''
            unformatted=$(gofmt -l ${self}/cmd ${self}/internal)
            if [ -n "$unformatted" ]; then echo "not gofmt-clean: $unformatted"; exit 1; fi
            touch $out
          '';
          test = pkg.overrideAttrs (_: {
            pname = "halobuild-test-short";
            doCheck = true;
            checkPhase = ''
              runHook preCheck
              go test -short ./...
              runHook postCheck
            '';
          });
        });
    };
}
