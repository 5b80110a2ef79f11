export { buildServiceSpec, logDirFor, servicePath, SERVICE_LABEL, SYSTEMD_UNIT_NAME, type ServiceSpec, type ServiceSpecInput } from './spec.js';
export { renderLaunchAgent } from './launchd.js';
export { renderSystemdUnit } from './systemd.js';
export {
  installService,
  uninstallService,
  serviceStatus,
  serviceFilePath,
  renderServiceFile,
  parseLaunchctlPrint,
  parseSystemctlShow,
  type ServiceHost,
  type ServiceStatus,
  type InstallResult,
} from './manager.js';
export { realServiceHost } from './host.js';
